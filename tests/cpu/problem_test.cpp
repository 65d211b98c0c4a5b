// FLOP counts follow the FlashAttention convention and count only unmasked
// (query, key) pairs.
#include <gtest/gtest.h>

#include "common/problem.hpp"

namespace flashgen {
namespace {

double brute_force_pairs(const Problem& p) {
  double pairs = 0;
  for (std::int64_t i = 0; i < p.seq_q; ++i)
    for (std::int64_t j = 0; j < p.seq_kv; ++j)
      if (!p.causal || j <= i + p.seq_kv - p.seq_q) ++pairs;
  return pairs;
}

Problem shape(std::int64_t seq_q, std::int64_t seq_kv, bool causal) {
  Problem p;
  p.batch = 2, p.heads_q = 4, p.heads_kv = 2, p.dim_qk = 64, p.dim_v = 32;
  p.seq_q = seq_q, p.seq_kv = seq_kv, p.causal = causal;
  return p;
}

TEST(Problem, UnmaskedPairsMatchBruteForce) {
  for (std::int64_t sq : {1, 2, 7, 64, 100})
    for (std::int64_t skv : {1, 3, 7, 64, 129})
      for (bool causal : {false, true}) {
        const Problem p = shape(sq, skv, causal);
        EXPECT_EQ(unmasked_pairs(p), brute_force_pairs(p)) << sq << " " << skv << " " << causal;
      }
}

TEST(Problem, FlopsFollowTheFlashAttentionConvention) {
  const Problem p = shape(1024, 1024, false);
  // 4 · N² · D per (batch, head) when Dqk = Dv = D; here 2 · N² · (64 + 32).
  EXPECT_EQ(forward_flops(p), 2.0 * 2 * 4 * 1024.0 * 1024.0 * (64 + 32));
  EXPECT_EQ(backward_flops(p), 2.5 * forward_flops(p));
  const Problem c = shape(1024, 1024, true);
  EXPECT_EQ(forward_flops(c), 2.0 * 2 * 4 * (1024.0 * 1025.0 / 2) * (64 + 32));
}

TEST(Problem, StridesCopyTheView) {
  TensorView t;
  const std::int64_t stride[4] = {1000, 100, 10, 2};
  for (int i = 0; i < 4; ++i) t.stride[i] = stride[i];
  const Strides4 s = strides_of(t);
  EXPECT_EQ(s.batch, 1000);
  EXPECT_EQ(s.seq, 100);
  EXPECT_EQ(s.heads, 10);
  EXPECT_EQ(s.dim, 2);
  RowStatsView r;
  r.stride[0] = 30, r.stride[1] = 5, r.stride[2] = 1;
  const Strides3 s3 = strides_of(r);
  EXPECT_EQ(s3.batch, 30);
  EXPECT_EQ(s3.heads, 5);
  EXPECT_EQ(s3.seq, 1);
}

}  // namespace
}  // namespace flashgen
