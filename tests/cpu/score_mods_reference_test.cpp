// The fp64 reference's masks and modifiers checked without the reference
// itself: the mask against the formulas pair by pair, the gradients
// (dQ, dK through the soft cap and ALiBi, the sinks' gradient) against
// central finite differences of its own forward. And the CPU backend's
// block enumeration: tiles wholly outside a window are never visited.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/problem.hpp"
#include "cpu/blocking.hpp"
#include "cpu/reference.hpp"

namespace flashgen::cpu {
namespace {

Problem small_problem(std::int64_t seq_q, std::int64_t seq_kv) {
  Problem p;
  p.batch = 2, p.heads_q = 4, p.heads_kv = 2, p.dim_qk = 5, p.dim_v = 3;
  p.seq_q = seq_q, p.seq_kv = seq_kv, p.dtype = DType::f32, p.scale = 0.7;
  return p;
}

// The rules, pair by pair: window in flash-attn 2's sense (-1 =
// unbounded), causal bottom-right (j <= i + Skv - Sq) or top-left (j <= i).
bool sees(const Problem& p, std::int64_t i, std::int64_t j) {
  const std::int64_t diagonal = i + p.seq_kv - p.seq_q;
  if (p.window_left >= 0 && j < diagonal - p.window_left) return false;
  if (p.window_right >= 0 && j > diagonal + p.window_right) return false;
  if (p.causal) {
    const bool top_left = p.causal_alignment == CausalAlignment::top_left;
    if (j > (top_left ? i : diagonal)) return false;
  }
  return true;
}

TEST(ScoreModsReference, MaskRangesMatchThePairRule) {
  for (const auto [sq, skv] : {std::pair{7, 7}, {5, 11}, {11, 5}, {1, 9}, {9, 1}})
    for (const std::int64_t left : {-1, 0, 2, 20})
      for (const std::int64_t right : {-1, 0, 3})
        for (const bool causal : {false, true})
          for (const auto alignment : {CausalAlignment::bottom_right, CausalAlignment::top_left}) {
            Problem p = small_problem(sq, skv);
            p.window_left = left, p.window_right = right, p.causal = causal;
            p.causal_alignment = alignment;
            double pairs = 0;
            for (std::int64_t i = 0; i < sq; ++i)
              for (std::int64_t j = 0; j < skv; ++j) {
                const RowRange keys = visible_keys(p, i), queries = seeing_queries(p, j);
                const bool rule = sees(p, i, j);
                pairs += rule;
                ASSERT_EQ(rule, j >= keys.begin && j < keys.end)
                    << "keys of row " << i << " key " << j << " sq " << sq << " skv " << skv
                    << " window (" << left << ", " << right << ") causal " << causal;
                ASSERT_EQ(rule, i >= queries.begin && i < queries.end)
                    << "queries of key " << j << " row " << i;
              }
            EXPECT_EQ(unmasked_pairs(p), pairs);
          }
}

// A window's cost grows with its width, not with the sequence: each block
// of 256 query rows visits only the key blocks its rows see, and each key
// block only the query blocks that see it.
TEST(ScoreModsReference, BlocksOutsideTheWindowAreNotVisited) {
  Problem p = small_problem(4096, 4096);
  p.window_left = 100, p.window_right = 0;
  const Blocking b = choose_blocking(p);
  ASSERT_EQ(b.query_rows, 256);
  ASSERT_EQ(b.key_rows, 256);
  std::int64_t visited = 0;
  for (std::int64_t block = 0; block < ceil_div(p.seq_q, b.query_rows); ++block) {
    const RowRange keys = key_blocks_seen(p, b, block * b.query_rows, b.query_rows);
    EXPECT_EQ(keys.end, block + 1);
    EXPECT_EQ(keys.begin, block == 0 ? 0 : block - 1);
    visited += keys.size();
  }
  EXPECT_EQ(visited, 16 + 15);  // of 16 x 16 tiles
  for (std::int64_t block = 0; block < ceil_div(p.seq_kv, b.key_rows); ++block) {
    const RowRange queries = query_blocks_seeing(p, b, block * b.key_rows, b.key_rows);
    EXPECT_EQ(queries.begin, block);
    EXPECT_EQ(queries.end, std::min<std::int64_t>(block + 2, 16));
  }
  // A block whose rows all see nothing visits nothing.
  Problem narrow = small_problem(1024, 256);
  narrow.window_left = narrow.window_right = 0;
  EXPECT_TRUE(key_blocks_seen(narrow, b, 0, 256).empty());
  EXPECT_EQ(key_blocks_seen(narrow, b, 768, 256).size(), 1);
}

// L = Σ O ∘ G: its gradient is the reference backward's with grad_o = G.
double loss(const Problem& p, const PackedInputs& in) {
  const ForwardResult f = reference_forward(p, in, 1);
  double l = 0;
  for (std::size_t i = 0; i < f.o.size(); ++i) l += f.o[i] * in.grad_o[i];
  return l;
}

PackedInputs random_inputs(const Problem& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  PackedInputs in;
  auto fill = [&](std::vector<double>& x, std::int64_t n) {
    x.resize(n);
    for (double& e : x) e = u(rng);
  };
  fill(in.q, p.batch * p.seq_q * p.heads_q * p.dim_qk);
  fill(in.k, p.batch * p.seq_kv * p.heads_kv * p.dim_qk);
  fill(in.v, p.batch * p.seq_kv * p.heads_kv * p.dim_v);
  fill(in.grad_o, p.batch * p.seq_q * p.heads_q * p.dim_v);
  return in;
}

TEST(ScoreModsReference, GradientsMatchFiniteDifferences) {
  std::vector<float> slopes = {0.5f, 0.25f, 0.125f, 0.0625f, 0.3f, 0.2f, 0.1f, 0.05f};
  std::vector<float> sinks = {0.4f, -0.6f, 1.2f, 0.0f};
  Problem p = small_problem(6, 9);
  p.causal = true;
  p.window_left = 4;
  p.softcap = 1.25;
  p.alibi_slopes = HeadVectorView::batch_heads(slopes.data(), 2, 4);
  p.sinks = HeadVectorView::heads(sinks.data(), 4);
  PackedInputs in = random_inputs(p, 29);
  const BackwardResult g = reference_backward(p, in, 1);
  ASSERT_EQ(g.grad_sinks.size(), 4u);

  const double eps = 1e-5;
  auto central = [&](double& x) {
    const double saved = x;
    x = saved + eps;
    const double up = loss(p, in);
    x = saved - eps;
    const double down = loss(p, in);
    x = saved;
    return (up - down) / (2 * eps);
  };
  for (std::size_t i = 0; i < in.q.size(); i += 7)
    EXPECT_NEAR(g.grad_q[i], central(in.q[i]), 1e-6) << "dQ " << i;
  for (std::size_t i = 0; i < in.k.size(); i += 5)
    EXPECT_NEAR(g.grad_k[i], central(in.k[i]), 1e-6) << "dK " << i;
  for (std::size_t i = 0; i < in.v.size(); i += 3)
    EXPECT_NEAR(g.grad_v[i], central(in.v[i]), 1e-6) << "dV " << i;
  // The sinks are fp32: step by a power of two so sink ± h is exact.
  const float h = 1.0f / 1024;
  for (std::size_t head = 0; head < sinks.size(); ++head) {
    const float saved = sinks[head];
    sinks[head] = saved + h;
    const double up = loss(p, in);
    sinks[head] = saved - h;
    const double down = loss(p, in);
    sinks[head] = saved;
    EXPECT_NEAR(g.grad_sinks[head], (up - down) / (2.0 * h), 1e-5) << "dsink " << head;
  }
}

}  // namespace
}  // namespace flashgen::cpu
