#include "varlen_case.hpp"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "attention_check.hpp"

namespace flashgen::testing {
namespace {

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

// The inputs' exact values for the reference, read through their strides
// (downloaded where they live on the device).
cpu::PackedInputs packed_inputs(const VarlenTensors& t, bool with_grad_o) {
  std::vector<unsigned char> q = t.q.download(), k = t.k.download(), v = t.v.download(),
                             grad_o = t.grad_o.download();
  const TensorView grad_o_view = t.grad_o.host_view(grad_o);
  return cpu::pack_inputs(t.q.host_view(q), t.k.host_view(k), t.v.host_view(v),
                          with_grad_o ? &grad_o_view : nullptr);
}

std::string written_and_guarded(const char* name, const TestTensor& t) {
  const std::vector<unsigned char> now = t.download();
  std::string problem = t.check_all_written(now) + t.check_outside_unchanged(now);
  return problem.empty() ? "" : std::string(name) + ": " + problem;
}

}  // namespace

std::vector<VarlenCase> varlen_cases() {
  return {
      {"mixed_lengths", {5, 0, 1, 300, 17}, {7, 3, 1, 300, 0}},
      {"mixed_causal", {5, 0, 1, 300, 17}, {7, 3, 1, 300, 40}, 2, 2, 32, 32, true},
      {"prefill_causal_gqa8", {33, 1, 64}, {33, 1, 64}, 8, 1, 64, 64, true},
      {"mqa_d40", {9, 70}, {20, 70}, 4, 1, 40, 40, true},
      {"odd_d127_f16", {3, 1, 50}, {3, 2, 49}, 2, 1, 127, 127, false, DType::f16},
      {"dqk40_dv24_f32_padded", {16, 0, 31}, {16, 5, 31}, 3, 3, 40, 24, true, DType::f32,
       Layout::padded},
      {"query_longer_than_keys_causal", {20, 4}, {3, 8}, 2, 2, 16, 16, true},
      {"all_empty", {0, 0}, {0, 0}},
      {"blocks_d128_gqa_causal", {700, 129, 0, 1000}, {700, 300, 5, 1000}, 8, 2, 128, 128, true},
      {"window_softcap_sinks_gqa", {90, 3, 257}, {120, 3, 200}, 4, 2, 64, 64, true, DType::bf16,
       Layout::bshd, false, 48, 0, 30.0, true},
      {"top_left_window_d80_f16", {70, 1, 33}, {40, 9, 100}, 2, 1, 80, 80, true, DType::f16,
       Layout::bshd, true, 20, 8},
      {"mask_b_causal_gqa", {150, 0, 64, 33}, {200, 7, 64, 20}, 4, 2, 64, 64, true, DType::bf16,
       Layout::bshd, false, -1, -1, 0.0, false, "(kv_idx + b) % 5 != 2 && q_idx - kv_idx < 90"},
      {"mask_without_b_d128", {300, 17}, {260, 40}, 2, 2, 128, 128, false, DType::bf16,
       Layout::bshd, false, -1, -1, 0.0, false, "kv_idx / 16 % 3 != q_idx % 3"},
      {"alibi_rows_softcap_gqa", {80, 0, 130}, {100, 4, 90}, 4, 2, 64, 64, true, DType::bf16,
       Layout::bshd, false, -1, -1, 20.0, false, "", 2},
      {"alibi_heads_f32_d40", {33, 70}, {50, 70}, 2, 1, 40, 40, false, DType::f32, Layout::bshd,
       false, -1, -1, 0.0, false, "", 1},
  };
}

VarlenTensors::VarlenTensors(const VarlenCase& c, MemoryKind memory_, bool host_offsets)
    : offsets_memory(host_offsets ? MemoryKind::host : memory_),
      cu_q(cumulative(c.lengths_q)),
      cu_k(cumulative(c.lengths_k)),
      cu_q_storage(stored(cu_q, offsets_memory)),
      cu_k_storage(stored(cu_k, offsets_memory)),
      q(memory_, c.dtype, 1, cu_q.back(), c.heads_q, c.dim_qk, c.layout),
      k(memory_, c.dtype, 1, cu_k.back(), c.heads_kv, c.dim_qk, c.layout),
      v(memory_, c.dtype, 1, cu_k.back(), c.heads_kv, c.dim_v, c.layout),
      grad_o(memory_, c.dtype, 1, cu_q.back(), c.heads_q, c.dim_v, c.layout),
      o(memory_, c.dtype, 1, cu_q.back(), c.heads_q, c.dim_v, c.layout),
      lse(TestTensor::row_stats(memory_, 1, c.heads_q, cu_q.back())),
      grad_q(memory_, c.dtype, 1, cu_q.back(), c.heads_q, c.dim_qk, c.layout),
      grad_k(memory_, c.dtype, 1, cu_k.back(), c.heads_kv, c.dim_qk, c.layout),
      grad_v(memory_, c.dtype, 1, cu_k.back(), c.heads_kv, c.dim_v, c.layout),
      sinks(TestTensor::row_stats(memory_, 1, c.heads_q, 1)),
      grad_sinks(TestTensor::row_stats(memory_, 1, c.heads_q, 1)),
      slopes(TestTensor::row_stats(memory_, std::max<std::int64_t>(1, cu_q.size() - 1),
                                   c.heads_q, 1)) {
  sinks.fill_random(seed_from(c.name + "/sinks"));
  grad_sinks.poison();
  for (double s : sinks.values(sinks.download())) sinks_host.push_back(static_cast<float>(s));
  slopes.fill_random(seed_from(c.name + "/slopes"));
  for (double s : slopes.values(slopes.download())) slopes_host.push_back(static_cast<float>(s));
  q.fill_random(seed_from(c.name + "/q"));
  k.fill_random(seed_from(c.name + "/k"));
  v.fill_random(seed_from(c.name + "/v"));
  grad_o.fill_random(seed_from(c.name + "/grad_o"));
  for (TestTensor* t : {&o, &lse, &grad_q, &grad_k, &grad_v}) t->poison();
}

VarlenForwardArgs VarlenTensors::forward_args(const VarlenCase& c) const {
  VarlenForwardArgs a;
  a.q = q.view(), a.k = k.view(), a.v = v.view(), a.o = o.view(), a.lse = lse.stats_view();
  a.cu_seqlens_q = IndexView::vector(static_cast<const std::int32_t*>(cu_q_storage->data()),
                                     static_cast<std::int64_t>(cu_q.size()), offsets_memory);
  a.cu_seqlens_k = IndexView::vector(static_cast<const std::int32_t*>(cu_k_storage->data()),
                                     static_cast<std::int64_t>(cu_k.size()), offsets_memory);
  a.max_seqlen_q = longest(c.lengths_q), a.max_seqlen_k = longest(c.lengths_k);
  return a;
}

VarlenBackwardArgs VarlenTensors::backward_args(const VarlenCase& c) const {
  const VarlenForwardArgs f = forward_args(c);
  VarlenBackwardArgs a;
  a.q = f.q, a.k = f.k, a.v = f.v, a.o = f.o, a.grad_o = grad_o.view(), a.lse = f.lse;
  a.grad_q = grad_q.view(), a.grad_k = grad_k.view(), a.grad_v = grad_v.view();
  a.cu_seqlens_q = f.cu_seqlens_q, a.cu_seqlens_k = f.cu_seqlens_k;
  a.max_seqlen_q = f.max_seqlen_q, a.max_seqlen_k = f.max_seqlen_k;
  return a;
}

Options VarlenTensors::with_score_options(const VarlenCase& c, Options options) const {
  options.causal_alignment =
      c.top_left ? CausalAlignment::top_left : CausalAlignment::bottom_right;
  options.window_left = c.window_left, options.window_right = c.window_right;
  options.softcap = c.softcap;
  options.mask_mod = c.mask_mod;
  if (c.alibi_rank > 0) {
    const RowStatsView s = slopes.stats_view();
    options.alibi_slopes =
        c.alibi_rank == 2 ? HeadVectorView::batch_heads(s.data, s.shape[0], c.heads_q, s.memory,
                                                        s.device)
                          : HeadVectorView::heads(s.data, c.heads_q, s.memory, s.device);
  }
  if (c.sinks) {
    const RowStatsView s = sinks.stats_view(), g = grad_sinks.stats_view();
    options.sinks = HeadVectorView::heads(s.data, c.heads_q, s.memory, s.device);
    options.grad_sinks = HeadVectorView::heads(g.data, c.heads_q, g.memory, g.device);
  }
  return options;
}

cpu::Sequences VarlenTensors::sequences() const {
  return {{cu_q.begin(), cu_q.end()}, {cu_k.begin(), cu_k.end()}};
}

Problem packed_problem(const VarlenCase& c, const VarlenTensors& t) {
  Problem p;
  p.batch = 1;
  p.seq_q = t.cu_q.back(), p.seq_kv = t.cu_k.back();
  p.heads_q = c.heads_q, p.heads_kv = c.heads_kv;
  p.dim_qk = c.dim_qk, p.dim_v = c.dim_v;
  p.dtype = c.dtype;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.dim_qk));
  p.causal = c.causal;
  p.causal_alignment = c.top_left ? CausalAlignment::top_left : CausalAlignment::bottom_right;
  p.window_left = c.window_left, p.window_right = c.window_right;
  p.softcap = c.softcap;
  if (c.sinks)  // the reference reads host memory
    p.sinks = HeadVectorView::heads(const_cast<float*>(t.sinks_host.data()), c.heads_q);
  Options mask;
  mask.mask_mod = c.mask_mod;
  p.mask = bind_mask(mask);
  float* slopes = const_cast<float*>(t.slopes_host.data());  // host memory, for the reference
  const std::int64_t sequences = static_cast<std::int64_t>(t.cu_q.size()) - 1;
  if (c.alibi_rank == 2) p.alibi_slopes = HeadVectorView::batch_heads(slopes, sequences, c.heads_q);
  if (c.alibi_rank == 1) p.alibi_slopes = HeadVectorView::heads(slopes, c.heads_q);
  return p;
}

void expect_rule(const char* name, const TestTensor& t, const std::vector<double>& ref,
                 const std::vector<double>& naive, DType precision) {
  EXPECT_EQ(written_and_guarded(name, t), "");
  EXPECT_EQ(tolerance_violation(name, t, t.values(t.download()), ref, naive, precision), "");
}

void check_varlen_forward(const VarlenCase& c, MemoryKind memory, const Options& options,
                          bool host_offsets) {
  VarlenTensors t(c, memory, host_offsets);
  forward_varlen(t.forward_args(c), t.with_score_options(c, options));
  const Problem p = packed_problem(c, t);
  const cpu::PackedInputs in = packed_inputs(t, false);
  const cpu::ForwardResult ref = reference_forward_varlen(p, t.sequences(), in, cpu::Oracle::fp64);
  const cpu::ForwardResult naive =
      reference_forward_varlen(p, t.sequences(), in, cpu::Oracle::naive_same_dtype);
  expect_rule("o", t.o, ref.o, naive.o, c.dtype);
  expect_rule("lse", t.lse, ref.lse, naive.lse, DType::f32);
  for (const TestTensor* input : {&t.q, &t.k, &t.v})
    EXPECT_EQ(input->check_unchanged(input->download()), "");
}

void check_varlen_backward(const VarlenCase& c, MemoryKind memory, const Options& options,
                           bool host_offsets) {
  VarlenTensors t(c, memory, host_offsets);
  const Options call = t.with_score_options(c, options);
  forward_varlen(t.forward_args(c), call);
  t.o.snapshot(), t.lse.snapshot();
  backward_varlen(t.backward_args(c), call);
  const Problem p = packed_problem(c, t);
  const cpu::PackedInputs in = packed_inputs(t, true);
  const cpu::BackwardResult ref =
      reference_backward_varlen(p, t.sequences(), in, cpu::Oracle::fp64);
  const cpu::BackwardResult naive =
      reference_backward_varlen(p, t.sequences(), in, cpu::Oracle::naive_same_dtype);
  expect_rule("grad_q", t.grad_q, ref.grad_q, naive.grad_q, c.dtype);
  expect_rule("grad_k", t.grad_k, ref.grad_k, naive.grad_k, c.dtype);
  expect_rule("grad_v", t.grad_v, ref.grad_v, naive.grad_v, c.dtype);
  if (c.sinks) expect_rule("grad_sinks", t.grad_sinks, ref.grad_sinks, naive.grad_sinks, DType::f32);
  for (const TestTensor* input : {&t.q, &t.k, &t.v, &t.grad_o, &t.o, &t.lse})
    EXPECT_EQ(input->check_unchanged(input->download()), "");
}

}  // namespace flashgen::testing
