// Validation of the public arguments: from ForwardArgs / BackwardArgs and
// Options, build the normalized Problem every backend consumes, or throw
// flashgen::Error(invalid_argument) whose message names the argument and the
// rule it broke. Nothing the caller passed is modified.
#pragma once

#include <cstdint>

#include "common/problem.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::api {

// Throws Error(invalid_argument) with the printf-formatted message.
[[noreturn]] void fail(const char* format, ...) __attribute__((format(printf, 1, 2)));

// The options on their own (validate_options.cpp): backend, scale, threads,
// causal alignment, window, soft cap, and the rank of the per-head vectors.
void check_options(const Options& options);

// `sequences` >= 0: the tensors pack that many sequences (varlen), whose
// per-head vectors of rank 2 have a row per sequence.
Problem validate_forward(const ForwardArgs& args, const Options& options,
                         std::int64_t sequences = -1);
Problem validate_backward(const BackwardArgs& args, const Options& options,
                          std::int64_t sequences = -1);

// The rules on options alone (for entry points that validate their tensors
// themselves).
void validate_options(const Options& options);
// The Problem of validated q, k, v (k, v any views with the kv heads and dims).
Problem problem_from(const TensorView& q, const TensorView& k, const TensorView& v,
                     const Options& options);

// The bytes [begin, end) a strided view can touch; begin == end when it has
// no elements. Views never have negative strides once validated, so the
// lowest address is data and the highest is data + max offset.
struct ByteRange {
  std::uintptr_t begin = 0, end = 0;
  bool empty() const { return begin == end; }
  bool overlaps(const ByteRange& other) const {
    return !empty() && !other.empty() && begin < other.end && other.begin < end;
  }
};

// Whether a view with these (non-negative) strides gives every element its
// own address. Sufficient test: with the axes of extent > 1 sorted by stride,
// each stride must exceed the largest offset the smaller axes reach. Every
// packed or sliced layout passes; only exotic interleavings are refused.
bool elements_are_distinct(int rank, const std::int64_t* shape, const std::int64_t* stride);

}  // namespace flashgen::api
