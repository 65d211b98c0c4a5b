// Outputs of problems with a zero-length sequence, written on the host
// without running a kernel: with no keys the softmax row is empty, so
// O = 0 and LSE = -inf (log of an empty sum); with no queries or no keys
// every gradient that has elements is 0.
#pragma once

#include "common/problem.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::api {

// Host memory only; p must be empty (api::is_empty).
void write_empty_forward(const Problem& p, const ForwardArgs& args);
void write_empty_backward(const Problem& p, const BackwardArgs& args);

// Every element of a host view set to zero (all dtypes encode +0 as zero bytes).
void fill_zero(const TensorView& t);

}  // namespace flashgen::api
