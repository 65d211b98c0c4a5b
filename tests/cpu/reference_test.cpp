// The fp64 reference is the oracle of every other test, so it is checked on
// its own: gradients against central finite differences of the forward, and
// the naive same-dtype computation against it.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype.hpp"
#include "common/problem.hpp"
#include "cpu/reference.hpp"

namespace flashgen::cpu {
namespace {

Problem tiny_problem(std::int64_t batch, std::int64_t seq_q, std::int64_t seq_kv,
                     std::int64_t heads_q, std::int64_t heads_kv, std::int64_t dim_qk,
                     std::int64_t dim_v, bool causal) {
  Problem p;
  p.batch = batch, p.seq_q = seq_q, p.seq_kv = seq_kv;
  p.heads_q = heads_q, p.heads_kv = heads_kv;
  p.dim_qk = dim_qk, p.dim_v = dim_v;
  p.causal = causal;
  p.dtype = DType::f32;
  p.scale = 0.7;  // not 1/sqrt(d), so a forgotten scale shows
  return p;
}

PackedInputs random_inputs(const Problem& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  auto fill = [&](std::int64_t n) {
    std::vector<double> x(static_cast<std::size_t>(n));
    for (double& e : x) e = normal(rng);
    return x;
  };
  PackedInputs in;
  in.q = fill(p.batch * p.seq_q * p.heads_q * p.dim_qk);
  in.k = fill(p.batch * p.seq_kv * p.heads_kv * p.dim_qk);
  in.v = fill(p.batch * p.seq_kv * p.heads_kv * p.dim_v);
  in.grad_o = fill(p.batch * p.seq_q * p.heads_q * p.dim_v);
  return in;
}

// loss = Σ O ∘ grad_o, whose gradient is what the backward returns.
double loss(const Problem& p, const PackedInputs& in) {
  const ForwardResult f = reference_forward(p, in, 1);
  double sum = 0.0;
  for (std::size_t i = 0; i < f.o.size(); ++i) sum += f.o[i] * in.grad_o[i];
  return sum;
}

void expect_matches_finite_differences(const Problem& p) {
  PackedInputs in = random_inputs(p, 7);
  const BackwardResult analytic = reference_backward(p, in, 1);
  constexpr double kStep = 1e-5;  // central differences: error ~ step² ≈ 1e-10
  constexpr double kTolerance = 1e-7;
  auto check = [&](const char* name, std::vector<double>& x, const std::vector<double>& grad) {
    ASSERT_EQ(x.size(), grad.size());
    double largest = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double saved = x[i];
      x[i] = saved + kStep;
      const double up = loss(p, in);
      x[i] = saved - kStep;
      const double down = loss(p, in);
      x[i] = saved;
      const double numeric = (up - down) / (2 * kStep);
      EXPECT_NEAR(grad[i], numeric, kTolerance * (1.0 + std::abs(numeric)))
          << name << "[" << i << "]";
      largest = std::max(largest, std::abs(numeric));
    }
    EXPECT_GT(largest, 1e-3) << name << ": all gradients vanish; the check would prove nothing";
  };
  check("grad_q", in.q, analytic.grad_q);
  check("grad_k", in.k, analytic.grad_k);
  check("grad_v", in.v, analytic.grad_v);
}

TEST(Reference, GradientsMatchFiniteDifferences) {
  expect_matches_finite_differences(tiny_problem(1, 3, 4, 1, 1, 3, 2, false));
}

TEST(Reference, GradientsMatchFiniteDifferencesWithGroupsAndBatch) {
  // Three query heads share one kv head: dK and dV sum over them.
  expect_matches_finite_differences(tiny_problem(2, 2, 4, 3, 1, 2, 3, false));
}

TEST(Reference, GradientsMatchFiniteDifferencesCausalWithEmptyRows) {
  // seq_q > seq_kv, bottom-right: rows 0 and 1 see no key, row 2 sees key 0.
  expect_matches_finite_differences(tiny_problem(1, 5, 3, 2, 1, 3, 2, true));
}

TEST(Reference, CausalMaskIsBottomRightAligned) {
  // With V = one-hot of the key index, O[i] shows which keys row i sees.
  const Problem p = tiny_problem(1, 3, 5, 1, 1, 1, 5, true);
  PackedInputs in;
  in.q.assign(3, 0.0);  // equal scores: uniform weights over the visible keys
  in.k.assign(5, 0.0);
  in.v.assign(25, 0.0);
  for (int j = 0; j < 5; ++j) in.v[j * 5 + j] = 1.0;
  const ForwardResult f = reference_forward(p, in, 1);
  for (int i = 0; i < 3; ++i) {
    const int visible = i + 5 - 3 + 1;  // keys j <= i + seq_kv - seq_q
    for (int j = 0; j < 5; ++j) {
      EXPECT_DOUBLE_EQ(f.o[i * 5 + j], j < visible ? 1.0 / visible : 0.0) << i << "," << j;
    }
    EXPECT_NEAR(f.lse[i], std::log(static_cast<double>(visible)), 1e-15);
  }
}

TEST(Reference, EmptyRowsHaveZeroOutputAndMinusInfinityLse) {
  const Problem p = tiny_problem(1, 4, 2, 1, 1, 2, 2, true);  // rows 0, 1 see no key
  const PackedInputs in = random_inputs(p, 3);
  ForwardResult f;
  const BackwardResult b = reference_backward(p, in, 1, &f);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(f.lse[i], -INFINITY);
    EXPECT_EQ(f.o[i * 2], 0.0);
    EXPECT_EQ(f.o[i * 2 + 1], 0.0);
    EXPECT_EQ(b.grad_q[i * 2], 0.0);
    EXPECT_EQ(b.grad_q[i * 2 + 1], 0.0);
  }
  EXPECT_TRUE(std::isfinite(f.lse[2]));
}

TEST(Reference, NaiveSameDtypeIsOnTheDtypeGridAndCloseToFp64) {
  Problem p = tiny_problem(1, 9, 11, 2, 1, 16, 8, true);
  PackedInputs in = random_inputs(p, 5);
  for (auto* x : {&in.q, &in.k, &in.v, &in.grad_o}) {
    for (double& e : *x) e = round_to_dtype(static_cast<float>(e), DType::bf16);
  }
  p.dtype = DType::bf16;
  const BackwardResult ref = reference_backward(p, in, 1);
  ForwardResult naive_forward;
  const BackwardResult naive = naive_same_dtype_backward(p, in, 1, &naive_forward);
  auto expect_close_on_grid = [&](const char* name, const std::vector<double>& x,
                                  const std::vector<double>& r) {
    double error = 0.0, magnitude = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(x[i], round_to_dtype(static_cast<float>(x[i]), DType::bf16)) << name << i;
      error = std::max(error, std::abs(x[i] - r[i]));
      magnitude = std::max(magnitude, std::abs(r[i]));
    }
    // Several bf16 roundings (2^-8 relative each) but no more.
    EXPECT_GT(error, 0.0) << name << ": no rounding at all; the yardstick would be zero";
    EXPECT_LT(error, 0.05 * magnitude) << name;
  };
  expect_close_on_grid("grad_q", naive.grad_q, ref.grad_q);
  expect_close_on_grid("grad_k", naive.grad_k, ref.grad_k);
  expect_close_on_grid("grad_v", naive.grad_v, ref.grad_v);
  expect_close_on_grid("o", naive_forward.o, reference_forward(p, in, 1).o);
}

TEST(Reference, ReadsAnyStridesAndDtype) {
  // A [1, 2, 3, 2] bf16 tensor stored [batch, heads, seq, dim] (BHSD).
  std::vector<std::uint16_t> bytes(12);
  for (int i = 0; i < 12; ++i) bytes[i] = float_to_bf16(static_cast<float>(i));
  TensorView t;
  t.data = bytes.data();
  t.dtype = DType::bf16;
  const std::int64_t shape[4] = {1, 2, 3, 2}, stride[4] = {12, 2, 4, 1};
  for (int i = 0; i < 4; ++i) t.shape[i] = shape[i], t.stride[i] = stride[i];
  const std::vector<double> packed = to_packed_double(t);
  // packed[s, h, d] = memory[h, s, d] = h * 4 + s * 2 + d
  for (int s = 0; s < 2; ++s)
    for (int h = 0; h < 3; ++h)
      for (int d = 0; d < 2; ++d) EXPECT_EQ(packed[(s * 3 + h) * 2 + d], h * 4 + s * 2 + d);
}

}  // namespace
}  // namespace flashgen::cpu
