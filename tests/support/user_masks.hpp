// The user masks (Options::mask_mod) the tests run, and the arrays they
// read: every backend's suite evaluates the same expressions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashgen/flashgen.hpp"

namespace flashgen::testing {

// Document ids of packed sequences (one per position, for q_idx and kv_idx
// alike: documents of 37, 1, 90, 130, 64, 200 positions, so some are shorter
// than a tile, one has length 1 and boundaries fall inside tiles), a prefix
// length per batch entry (17 + 150·b) and a float per head.
struct MaskArrays {
  explicit MaskArrays(std::int64_t positions, std::int64_t batch = 2, std::int64_t heads = 8);
  // The expression over these arrays ("doc", "prefix", "bias"), in host memory.
  Options options(const std::string& expression) const;
  std::vector<std::int32_t> doc, prefix;
  std::vector<float> bias;
};

// Test mask n (1-based): 1 a document mask, 2 a prefix-LM mask, 3 float
// arrays and a select, 4 a shifted index, 5 integer arithmetic with / and %,
// 6 a mask that leaves most rows no key, 7 a mask of keys alone (per batch
// entry: what decode may pack).
const char* test_mask(int n);
constexpr int kTestMasks = 7;

}  // namespace flashgen::testing
