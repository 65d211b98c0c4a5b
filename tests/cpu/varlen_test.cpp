// forward_varlen / backward_varlen on the CPU against the fp64 reference run
// per sequence: empty and one-token sequences, causal (bottom-right per
// sequence), GQA and MQA, odd head dimensions, strided tensors. Outputs are
// poisoned and guarded; inputs must come back unchanged.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attention_check.hpp"
#include "varlen_case.hpp"

namespace flashgen::testing {
namespace {

constexpr MemoryKind kHost = MemoryKind::host;

Options cpu_options(const VarlenCase& c) {
  Options options;
  options.backend = Backend::cpu;
  options.causal = c.causal;
  return options;
}

class CpuVarlen : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(CpuVarlen, ForwardMatchesTheReferencePerSequence) {
  check_varlen_forward(GetParam(), kHost, cpu_options(GetParam()));
}

TEST_P(CpuVarlen, BackwardMatchesTheReferencePerSequence) {
  check_varlen_backward(GetParam(), kHost, cpu_options(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuVarlen, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

// Sinks, ALiBi slopes per head, a window and a soft cap apply per sequence;
// dL/dsink sums every sequence's share, in sequence order.
TEST(CpuVarlenScoreOptions, ForwardAndBackwardWithSinksMatchTheReference) {
  const VarlenCase c{"score_options", {40, 0, 1, 70}, {40, 5, 1, 90}, 4, 2, 24, 24, true};
  VarlenTensors t(c, kHost);
  std::vector<float> sinks = {-1.0f, 0.5f, 1.5f, 0.0f}, slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
  std::vector<float> grad_sinks(4, 9.0f);
  Options options = cpu_options(c);
  options.window_left = 20;
  options.softcap = 3.0;
  options.sinks = HeadVectorView::heads(sinks.data(), 4);
  options.alibi_slopes = HeadVectorView::heads(slopes.data(), 4);
  options.grad_sinks = HeadVectorView::heads(grad_sinks.data(), 4);
  Problem p = packed_problem(c, t);
  copy_score_options(options, p);
  const TensorView grad_o = t.grad_o.view();
  const cpu::PackedInputs in = cpu::pack_inputs(t.q.view(), t.k.view(), t.v.view(), &grad_o);
  cpu::ForwardResult ref_fwd, naive_fwd;
  const cpu::BackwardResult ref =
      reference_backward_varlen(p, t.sequences(), in, cpu::Oracle::fp64, &ref_fwd);
  const cpu::BackwardResult naive = reference_backward_varlen(
      p, t.sequences(), in, cpu::Oracle::naive_same_dtype, &naive_fwd);

  forward_varlen(t.forward_args(c), options);
  expect_rule("o", t.o, ref_fwd.o, naive_fwd.o, c.dtype);
  expect_rule("lse", t.lse, ref_fwd.lse, naive_fwd.lse, DType::f32);
  t.o.snapshot(), t.lse.snapshot();
  backward_varlen(t.backward_args(c), options);
  expect_rule("grad_q", t.grad_q, ref.grad_q, naive.grad_q, c.dtype);
  expect_rule("grad_k", t.grad_k, ref.grad_k, naive.grad_k, c.dtype);
  expect_rule("grad_v", t.grad_v, ref.grad_v, naive.grad_v, c.dtype);
  ASSERT_EQ(ref.grad_sinks.size(), 4u);
  double scale = 1.0;
  for (double x : ref.grad_sinks) scale = std::max(scale, std::abs(x));
  for (int h = 0; h < 4; ++h) {
    const double error = std::abs(grad_sinks[h] - ref.grad_sinks[h]);
    const double naive_error = std::abs(naive.grad_sinks[h] - ref.grad_sinks[h]);
    EXPECT_LE(error, 2 * naive_error + absolute_slack(c.dtype) * scale)
        << "grad_sinks[" << h << "] = " << grad_sinks[h] << ", reference " << ref.grad_sinks[h];
  }
}

TEST(CpuVarlenEdges, EmptySequencesAndRowsBeforeTheFirstKeyAreExactlyEmpty) {
  // Sequence 0 has no keys; sequence 1's first 3 rows see none (causal, 5 queries, 2 keys).
  const VarlenCase c{"edges", {4, 5}, {0, 2}, 1, 1, 16, 16, true};
  VarlenTensors t(c, kHost);
  forward_varlen(t.forward_args(c), cpu_options(c));
  const std::vector<double> o = t.o.values(t.o.download());
  const std::vector<double> lse = t.lse.values(t.lse.download());
  for (std::int64_t row = 0; row < 9; ++row) {
    const bool empty = row < 4 + 3;
    EXPECT_EQ(std::isinf(lse[row]) && lse[row] < 0, empty) << "row " << row;
    for (std::int64_t d = 0; d < 16 && empty; ++d) EXPECT_EQ(o[row * 16 + d], 0.0);
  }
}

}  // namespace
}  // namespace flashgen::testing
