#include "cuda/kernel_args.hpp"

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>

namespace flashgen::cuda {

flashgen_device::TensorArg tensor_arg(const TensorView& t) {
  return {t.data, t.stride[0], t.stride[1], t.stride[2], t.stride[3]};
}

flashgen_device::RowStatsArg row_stats_arg(const RowStatsView& t) {
  return {t.data, t.stride[0], t.stride[1], t.stride[2]};
}

MaskDiagonals mask_diagonals(const Problem& p) {
  MaskDiagonals d;
  const std::int64_t diagonal = p.diagonal_offset();
  std::int64_t past = p.seq_kv;  // no key is past i + seq_kv for any i >= 0
  if (p.causal) {
    d.past = true;
    past = p.causal_offset();
  }
  // The right edge masks a key of row 0 only when diagonal + right < seq_kv - 1.
  if (p.window_right >= 0 && diagonal + p.window_right < p.seq_kv - 1) {
    d.past = true;
    past = std::min(past, diagonal + p.window_right);
  }
  // The left edge masks a key of the last row only when left < seq_kv - 1.
  if (p.window_left >= 0 && p.window_left < p.seq_kv - 1) {
    d.before = true;
    d.before_offset = static_cast<int>(diagonal - p.window_left);
  }
  d.past_offset = static_cast<int>(past);
  return d;
}

namespace {

// The KV cache's pointers and sizes (device/copy/cache_rows.cuh). Each
// batch entry measures the past diagonal from its own count of keys n, as
// the least of mask_diagonals' terms: n (no such mask), n − seq_q
// (bottom-right causal), 0 (top-left causal), n − seq_q + right (a window's
// right edge that masks a key), kept as min(fixed, n + relative).
void place_key_cache(const Problem& p, flashgen_device::AttentionParams& a) {
  const KeyValueCache& c = p.kv_cache;
  a.cache_seqlens = c.lengths;
  a.cache_seqlens_stride = c.lengths_stride;
  a.k_new = tensor_arg(c.k_new);
  a.v_new = tensor_arg(c.v_new);
  a.seq_new = static_cast<int>(c.appended);
  std::int64_t fixed = std::numeric_limits<int>::max(), relative = 0;
  if (p.causal && p.causal_alignment == CausalAlignment::top_left) fixed = 0;
  if (p.causal && p.causal_alignment != CausalAlignment::top_left) relative = -p.seq_q;
  if (p.window_right >= 0 && p.window_right < p.seq_q - 1)
    relative = std::min(relative, p.window_right - p.seq_q);
  a.cache_past_fixed = static_cast<int>(fixed);
  a.cache_past_relative = static_cast<int>(relative);
  a.block_table = c.block_table;
  a.block_table_stride = c.block_table_strides[0];
  a.block_table_column_stride = c.block_table_strides[1];
  a.page_size = static_cast<int>(c.page_size);
  a.num_pages = static_cast<int>(c.num_pages);
  // One scale ([1]) is every head's: stride 0.
  a.k_scale = c.k_scale.data;
  a.k_scale_stride = c.k_scale.shape[0] == 1 ? 0 : c.k_scale.stride[0];
  a.v_scale = c.v_scale.data;
  a.v_scale_stride = c.v_scale.shape[0] == 1 ? 0 : c.v_scale.stride[0];
}

}  // namespace

void place_sequences(const Problem& p, flashgen_device::AttentionParams& a) {
  const PackedSequences& s = p.sequences;
  if (!s.given()) return;
  a.q_begin = s.q_begin;
  a.k_begin = s.k_begin;
  a.q_begin_stride = s.q_begin_stride;
  a.k_begin_stride = s.k_begin_stride;
  a.total_q = static_cast<int>(s.total_q);
  a.total_kv = static_cast<int>(s.total_kv);
  // mask_diagonals' terms, measured from each sequence's diagonal sk − sq:
  // past = min(0 (top-left causal), sk − sq (bottom-right causal), sk − sq
  // + right (a window's right edge)); before = sk − sq − left. Where the
  // problem has no such edge the kernels do not read the field.
  constexpr int kFar = 1 << 30;
  const bool top_left = p.causal_alignment == CausalAlignment::top_left;
  int relative = kFar;
  if (p.causal && !top_left) relative = 0;
  if (p.window_right >= 0) relative = std::min<std::int64_t>(relative, p.window_right);
  a.sequence_past_fixed = p.causal && top_left ? 0 : std::numeric_limits<int>::max();
  a.sequence_past_relative = relative;
  a.sequence_before_relative =
      p.window_left >= 0 ? static_cast<int>(-p.window_left) : -kFar;
  for (flashgen_device::TensorArg* t :
       {&a.q, &a.k, &a.v, &a.o, &a.grad_o, &a.grad_q, &a.grad_k, &a.grad_v})
    t->stride_batch = 0;
  a.lse.stride_batch = 0;
}

flashgen_device::AttentionParams problem_params(const Problem& p) {
  flashgen_device::AttentionParams a{};
  a.batch = static_cast<int>(p.batch);
  a.seq_q = static_cast<int>(p.seq_q);
  a.seq_kv = static_cast<int>(p.seq_kv);
  a.heads_q = static_cast<int>(p.heads_q);
  a.heads_kv = static_cast<int>(p.heads_kv);
  a.group_size = static_cast<int>(p.group_size());
  a.dim_qk = static_cast<int>(p.dim_qk);
  a.dim_v = static_cast<int>(p.dim_v);
  const MaskDiagonals diagonals = mask_diagonals(p);
  a.causal_offset = diagonals.past_offset;
  a.window_offset = diagonals.before_offset;
  a.scale = static_cast<float>(p.scale);
  a.scale_log2 = static_cast<float>(p.scale * M_LOG2E);
  a.key_splits = 1;
  if (p.softcap > 0.0) {
    a.softcap_scale = static_cast<float>(p.scale / p.softcap);
    a.softcap_log2 = static_cast<float>(p.softcap * M_LOG2E);
    a.softcap_inverse_log2 = static_cast<float>(1.0 / (p.softcap * M_LOG2E));
  }
  a.sinks = p.sinks.data;
  a.sinks_stride = p.sinks.stride[0];
  // [heads_q] or [batch, heads_q] (HeadVectorView): one slope per head, or per (batch, head).
  const HeadVectorView& slopes = p.alibi_slopes;
  a.alibi_slopes = slopes.data;
  a.alibi_stride_batch = slopes.rank == 2 ? slopes.stride[0] : 0;
  a.alibi_stride_heads = slopes.rank == 2 ? slopes.stride[1] : slopes.stride[0];
  a.diagonal_offset = static_cast<int>(p.diagonal_offset());
  if (p.kv_cache.given()) place_key_cache(p, a);
  return a;
}

int alignment_class(std::initializer_list<const TensorView*> tensors) {
  int vec = 8;
  for (const TensorView* t : tensors) {
    if (t->stride[3] != 1 && t->shape[3] > 1) return 0;  // elements gathered one by one
    const auto address = reinterpret_cast<std::uintptr_t>(t->data);
    while (vec > 1) {
      const std::int64_t bytes = vec * static_cast<std::int64_t>(size_of(t->dtype));
      bool ok = address % bytes == 0;
      for (int d = 0; d < 3; ++d) ok = ok && (t->shape[d] <= 1 || t->stride[d] % vec == 0);
      if (ok) break;
      vec /= 2;
    }
  }
  return vec;
}

}  // namespace flashgen::cuda
