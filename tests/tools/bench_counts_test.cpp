// The FLOP and instruction counts behind `flashgen bench`'s rate columns,
// above all the per-kernel ones of the deterministic backward's two kernels.
#include <gtest/gtest.h>

#include "common/problem.hpp"
#include "problem_options.hpp"

namespace flashgen::cli {
namespace {

Problem shape(bool causal) {
  Problem p;
  p.batch = 2, p.heads_q = 4, p.heads_kv = 2, p.dim_qk = p.dim_v = 64;
  p.seq_q = p.seq_kv = 1024, p.causal = causal;
  return p;
}

constexpr double kOneSecondMs = 1000;  // so a rate reads as a count / 1e9

TEST(BenchCounts, StageFlopsCountTheirGemms) {
  for (bool causal : {false, true}) {
    const Problem p = shape(causal);
    // 2 · D FLOPs per unmasked pair and GEMM, over every (batch, head).
    const double per_gemm = 2.0 * 2 * 4 * unmasked_pairs(p) * 64;
    EXPECT_DOUBLE_EQ(forward_flops(p), 2 * per_gemm);
    EXPECT_DOUBLE_EQ(backward_query_flops(p), 3 * per_gemm);
    EXPECT_DOUBLE_EQ(backward_key_value_flops(p), 4 * per_gemm);
    EXPECT_DOUBLE_EQ(backward_query_flops(p), 1.5 * forward_flops(p));
    EXPECT_DOUBLE_EQ(backward_key_value_flops(p), 2.0 * forward_flops(p));
  }
}

TEST(BenchCounts, InstructionsPerHead) {
  const Problem p = shape(false);
  const double heads_pairs = 2 * 4 * 1024.0 * 1024.0;
  EXPECT_DOUBLE_EQ(forward_ginstrs(p, kOneSecondMs), heads_pairs * (2 * 64 + 5) / 1e9);
  EXPECT_DOUBLE_EQ(backward_query_ginstrs(p, kOneSecondMs), heads_pairs * (3 * 64 + 5) / 1e9);
  EXPECT_DOUBLE_EQ(backward_key_value_ginstrs(p, kOneSecondMs), heads_pairs * (4 * 64 + 5) / 1e9);
}

TEST(BenchCounts, StageInstructionsAddUpToTheBackward) {
  for (bool causal : {false, true}) {
    const Problem p = shape(causal);
    EXPECT_DOUBLE_EQ(backward_query_ginstrs(p, 2.5) + backward_key_value_ginstrs(p, 2.5),
                     backward_ginstrs(p, 2.5));
  }
}

TEST(BenchCounts, CausalCountsUnmaskedPairs) {
  const Problem c = shape(true);
  const double heads_pairs = 2 * 4 * (1024.0 * 1025.0 / 2);
  EXPECT_DOUBLE_EQ(backward_query_ginstrs(c, kOneSecondMs), heads_pairs * (3 * 64 + 5) / 1e9);
}

TEST(BenchCounts, NoTimeNoRate) {
  const Problem p = shape(false);
  EXPECT_EQ(backward_query_ginstrs(p, 0), 0);
  EXPECT_EQ(backward_key_value_ginstrs(p, -1), 0);
  EXPECT_EQ(flop_rate(backward_query_flops(p), 0, 1e12), 0);
}

}  // namespace
}  // namespace flashgen::cli
