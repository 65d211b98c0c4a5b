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
#include "cpu/reference_sequences.hpp"
#include "flashgen/sequences.hpp"
#include "test_tensor.hpp"

namespace flashgen::testing {
namespace {

constexpr MemoryKind kHost = MemoryKind::host;

struct VarlenCase {
  std::string name;
  std::vector<std::int64_t> lengths_q, lengths_k;  // per sequence
  std::int64_t heads_q = 2, heads_kv = 2, dim_qk = 32, dim_v = 32;
  bool causal = false;
  DType dtype = DType::bf16;
  Layout layout = Layout::bshd;
};

void PrintTo(const VarlenCase& c, std::ostream* os) { *os << c.name; }

std::vector<std::int32_t> cumulative(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int32_t> out = {0};
  for (std::int64_t n : lengths) out.push_back(out.back() + static_cast<std::int32_t>(n));
  return out;
}

std::int64_t longest(const std::vector<std::int64_t>& lengths) {
  std::int64_t m = 0;
  for (std::int64_t n : lengths) m = std::max(m, n);
  return m;
}

// The packed tensors of a case, inputs filled, outputs poisoned.
struct VarlenTensors {
  explicit VarlenTensors(const VarlenCase& c)
      : cu_q(cumulative(c.lengths_q)),
        cu_k(cumulative(c.lengths_k)),
        q(kHost, c.dtype, 1, cu_q.back(), c.heads_q, c.dim_qk, c.layout),
        k(kHost, c.dtype, 1, cu_k.back(), c.heads_kv, c.dim_qk, c.layout),
        v(kHost, c.dtype, 1, cu_k.back(), c.heads_kv, c.dim_v, c.layout),
        grad_o(kHost, c.dtype, 1, cu_q.back(), c.heads_q, c.dim_v, c.layout),
        o(kHost, c.dtype, 1, cu_q.back(), c.heads_q, c.dim_v, c.layout),
        lse(TestTensor::row_stats(kHost, 1, c.heads_q, cu_q.back())),
        grad_q(kHost, c.dtype, 1, cu_q.back(), c.heads_q, c.dim_qk, c.layout),
        grad_k(kHost, c.dtype, 1, cu_k.back(), c.heads_kv, c.dim_qk, c.layout),
        grad_v(kHost, c.dtype, 1, cu_k.back(), c.heads_kv, c.dim_v, c.layout) {
    q.fill_random(seed_from(c.name + "/q"));
    k.fill_random(seed_from(c.name + "/k"));
    v.fill_random(seed_from(c.name + "/v"));
    grad_o.fill_random(seed_from(c.name + "/grad_o"));
    for (TestTensor* t : {&o, &lse, &grad_q, &grad_k, &grad_v}) t->poison();
  }

  VarlenForwardArgs forward_args(const VarlenCase& c) const {
    VarlenForwardArgs a;
    a.q = q.view(), a.k = k.view(), a.v = v.view(), a.o = o.view(), a.lse = lse.stats_view();
    a.cu_seqlens_q = IndexView::vector(cu_q.data(), static_cast<std::int64_t>(cu_q.size()));
    a.cu_seqlens_k = IndexView::vector(cu_k.data(), static_cast<std::int64_t>(cu_k.size()));
    a.max_seqlen_q = longest(c.lengths_q), a.max_seqlen_k = longest(c.lengths_k);
    return a;
  }

  VarlenBackwardArgs backward_args(const VarlenCase& c) const {
    const VarlenForwardArgs f = forward_args(c);
    VarlenBackwardArgs a;
    a.q = f.q, a.k = f.k, a.v = f.v, a.o = f.o, a.grad_o = grad_o.view(), a.lse = f.lse;
    a.grad_q = grad_q.view(), a.grad_k = grad_k.view(), a.grad_v = grad_v.view();
    a.cu_seqlens_q = f.cu_seqlens_q, a.cu_seqlens_k = f.cu_seqlens_k;
    a.max_seqlen_q = f.max_seqlen_q, a.max_seqlen_k = f.max_seqlen_k;
    return a;
  }

  cpu::Sequences sequences() const {
    return {{cu_q.begin(), cu_q.end()}, {cu_k.begin(), cu_k.end()}};
  }

  std::vector<std::int32_t> cu_q, cu_k;
  TestTensor q, k, v, grad_o, o, lse, grad_q, grad_k, grad_v;
};

Problem packed_problem(const VarlenCase& c, const VarlenTensors& t) {
  Problem p;
  p.batch = 1;
  p.seq_q = t.cu_q.back(), p.seq_kv = t.cu_k.back();
  p.heads_q = c.heads_q, p.heads_kv = c.heads_kv;
  p.dim_qk = c.dim_qk, p.dim_v = c.dim_v;
  p.dtype = c.dtype;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.dim_qk));
  p.causal = c.causal;
  return p;
}

Options cpu_options(const VarlenCase& c) {
  Options options;
  options.backend = Backend::cpu;
  options.causal = c.causal;
  return options;
}

std::string written_and_guarded(const char* name, const TestTensor& t) {
  const std::vector<unsigned char> now = t.download();
  std::string problem = t.check_all_written(now) + t.check_outside_unchanged(now);
  return problem.empty() ? "" : std::string(name) + ": " + problem;
}

void expect_rule(const char* name, const TestTensor& t, const std::vector<double>& ref,
                 const std::vector<double>& naive, DType precision) {
  EXPECT_EQ(written_and_guarded(name, t), "");
  EXPECT_EQ(tolerance_violation(name, t, t.values(t.download()), ref, naive, precision), "");
}

std::vector<VarlenCase> varlen_cases() {
  std::vector<VarlenCase> cases = {
      {"mixed_lengths", {5, 0, 1, 300, 17}, {7, 3, 1, 300, 0}},
      {"mixed_causal", {5, 0, 1, 300, 17}, {7, 3, 1, 300, 40}, 2, 2, 32, 32, true},
      {"prefill_causal_gqa8", {33, 1, 64}, {33, 1, 64}, 8, 1, 64, 64, true},
      {"mqa_d40", {9, 70}, {20, 70}, 4, 1, 40, 40, true},
      {"odd_d127_f16", {3, 1, 50}, {3, 2, 49}, 2, 1, 127, 127, false, DType::f16},
      {"dqk40_dv24_f32_padded", {16, 0, 31}, {16, 5, 31}, 3, 3, 40, 24, true, DType::f32,
       Layout::padded},
      {"query_longer_than_keys_causal", {20, 4}, {3, 8}, 2, 2, 16, 16, true},
      {"all_empty", {0, 0}, {0, 0}},
  };
  return cases;
}

class CpuVarlen : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(CpuVarlen, ForwardMatchesTheReferencePerSequence) {
  const VarlenCase& c = GetParam();
  VarlenTensors t(c);
  forward_varlen(t.forward_args(c), cpu_options(c));
  const Problem p = packed_problem(c, t);
  const cpu::PackedInputs in = cpu::pack_inputs(t.q.view(), t.k.view(), t.v.view(), nullptr);
  const cpu::ForwardResult ref = reference_forward_varlen(p, t.sequences(), in, cpu::Oracle::fp64);
  const cpu::ForwardResult naive =
      reference_forward_varlen(p, t.sequences(), in, cpu::Oracle::naive_same_dtype);
  expect_rule("o", t.o, ref.o, naive.o, c.dtype);
  expect_rule("lse", t.lse, ref.lse, naive.lse, DType::f32);
  for (const TestTensor* input : {&t.q, &t.k, &t.v})
    EXPECT_EQ(input->check_unchanged(input->download()), "");
}

TEST_P(CpuVarlen, BackwardMatchesTheReferencePerSequence) {
  const VarlenCase& c = GetParam();
  VarlenTensors t(c);
  forward_varlen(t.forward_args(c), cpu_options(c));
  t.o.snapshot(), t.lse.snapshot();
  backward_varlen(t.backward_args(c), cpu_options(c));
  const Problem p = packed_problem(c, t);
  const TensorView grad_o = t.grad_o.view();
  const cpu::PackedInputs in = cpu::pack_inputs(t.q.view(), t.k.view(), t.v.view(), &grad_o);
  const cpu::BackwardResult ref =
      reference_backward_varlen(p, t.sequences(), in, cpu::Oracle::fp64);
  const cpu::BackwardResult naive =
      reference_backward_varlen(p, t.sequences(), in, cpu::Oracle::naive_same_dtype);
  expect_rule("grad_q", t.grad_q, ref.grad_q, naive.grad_q, c.dtype);
  expect_rule("grad_k", t.grad_k, ref.grad_k, naive.grad_k, c.dtype);
  expect_rule("grad_v", t.grad_v, ref.grad_v, naive.grad_v, c.dtype);
  for (const TestTensor* input : {&t.q, &t.k, &t.v, &t.grad_o, &t.o, &t.lse})
    EXPECT_EQ(input->check_unchanged(input->download()), "");
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuVarlen, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

// Sinks, ALiBi slopes per head, a window and a soft cap apply per sequence;
// dL/dsink sums every sequence's share, in sequence order.
TEST(CpuVarlenScoreOptions, ForwardAndBackwardWithSinksMatchTheReference) {
  const VarlenCase c{"score_options", {40, 0, 1, 70}, {40, 5, 1, 90}, 4, 2, 24, 24, true};
  VarlenTensors t(c);
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
  VarlenTensors t(c);
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
