// The normalized attention problem that every backend consumes. Built by
// src/api/ from validated views; backends never re-check user input.
#pragma once

#include <cstdint>
#include <memory>

#include "common/mask_expression.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen {

// Element strides of one [batch, seq, heads, dim] tensor.
struct Strides4 {
  std::int64_t batch = 0, seq = 0, heads = 0, dim = 1;
};

// Element strides of one [batch, heads, seq] row-statistics tensor.
struct Strides3 {
  std::int64_t batch = 0, heads = 0, seq = 1;
};

// A half-open range [begin, end) of rows; empty when end <= begin.
struct RowRange {
  std::int64_t begin = 0, end = 0;
  bool empty() const { return end <= begin; }
  std::int64_t size() const { return empty() ? 0 : end - begin; }
};

// A KV cache the GPU kernels read in place (forward_with_kvcache on CUDA
// tensors; flashgen/sequences.hpp has the layouts). The problem's K and V
// are the caches, its seq_kv the rows a sequence's cache holds; batch entry
// b attends to its first lengths[b] rows, then the `appended` rows of k_new
// / v_new, which the call also writes into the cache after them. All of it
// in device memory, read by the kernels only (nothing waits for it).
struct KeyValueCache {
  const std::int32_t* lengths = nullptr;  // cache_seqlens [batch]; null: no cache
  std::int64_t lengths_stride = 1;
  TensorView k_new, v_new;  // [batch, appended, heads_kv, dim]; data null: no append
  std::int64_t appended = 0;
  // Paged: [batch, max_pages] page numbers, k and v [num_pages, page_size, heads_kv, dim].
  const std::int32_t* block_table = nullptr;  // null: contiguous
  std::int64_t block_table_strides[2] = {0, 1};
  std::int64_t page_size = 0, num_pages = 0;
  // e4m3 caches, with their scales ([1] or [heads_kv]; data null: 1).
  bool fp8 = false;
  HeadVectorView k_scale, v_scale;

  bool given() const { return lengths != nullptr; }
  bool paged() const { return block_table != nullptr; }
};

// Packed sequences the GPU kernels find themselves (forward_varlen and
// backward_varlen on CUDA tensors): the problem's batch entries are the
// sequences, its seq_q and seq_kv the longest of them (max_seqlen_q,
// max_seqlen_k), and its tensors [1, total, heads, dim] (the LSE [1, heads,
// total_q]); sequence b's rows are [q_begin[b], q_begin[b + 1]) of the
// query-side tensors and [k_begin[b], k_begin[b + 1]) of the key-side ones.
// The offsets in device memory, read by the kernels only.
struct PackedSequences {
  const std::int32_t* q_begin = nullptr;  // cu_seqlens_q [batch + 1]; null: not packed
  const std::int32_t* k_begin = nullptr;  // cu_seqlens_k [batch + 1]
  std::int64_t q_begin_stride = 1, k_begin_stride = 1;
  std::int64_t total_q = 0, total_kv = 0;

  bool given() const { return q_begin != nullptr; }
};

struct Problem {
  std::int64_t batch = 0;
  std::int64_t seq_q = 0, seq_kv = 0;
  std::int64_t heads_q = 0, heads_kv = 0;
  std::int64_t dim_qk = 0, dim_v = 0;
  DType dtype = DType::bf16;
  double scale = 0.0;  // resolved (never unset here)
  bool causal = false;
  CausalAlignment causal_alignment = CausalAlignment::bottom_right;
  // Masks and score modifiers as in Options (validated; views in the
  // tensors' memory, data null when not given).
  std::int64_t window_left = -1, window_right = -1;  // -1 = unbounded
  double softcap = 0.0;                              // 0 = off
  HeadVectorView alibi_slopes, sinks, grad_sinks;
  // The user mask, parsed and bound to its arrays (null when off). The mask
  // sees batch entry e as b = mask_batch0 + e: a sequence of a varlen or
  // KV-cache call is a problem of batch 1 whose b is the sequence's index.
  std::shared_ptr<const mask::BoundMask> mask;
  std::int64_t mask_batch0 = 0;
  KeyValueCache kv_cache;  // the GPU's KV-cache forward only
  PackedSequences sequences;  // the GPU's varlen calls only

  // Query heads per kv head (0 where there are no heads at all).
  std::int64_t group_size() const { return heads_kv > 0 ? heads_q / heads_kv : 0; }
  // Causal: query row i sees keys j <= i + causal_offset() (seq_kv - seq_q
  // bottom-right, 0 top-left).
  std::int64_t causal_offset() const {
    return causal_alignment == CausalAlignment::top_left ? 0 : seq_kv - seq_q;
  }
  // The diagonal the window and ALiBi are measured from: key i + diagonal_offset().
  std::int64_t diagonal_offset() const { return seq_kv - seq_q; }
  bool has_window() const { return window_left >= 0 || window_right >= 0; }
  // Whether scores change beyond the scale (soft cap or ALiBi).
  bool modifies_scores() const { return softcap > 0.0 || alibi_slopes.given(); }
  bool has_sinks() const { return sinks.given(); }
  bool has_mask() const { return mask != nullptr; }

  // Host-memory reads of the per-head parameters (CPU backend, reference).
  double alibi_slope(std::int64_t batch, std::int64_t head) const;
  double sink(std::int64_t head) const;
};

// The masks and score modifiers of `options` into `p` (causal itself and
// the scale are the caller's); mask_mod is parsed and bound here, so the
// options must have passed validation (api/validate_options.cpp).
void copy_score_options(const Options& options, Problem& p);
// options.mask_mod parsed, with options.mask_tensors as its arrays; null when empty.
std::shared_ptr<const mask::BoundMask> bind_mask(const Options& options);

// ALiBi slopes of batch row b as [heads_q], for a sequence of a KV-cache
// call run as a problem of its own; [heads_q] slopes as they are.
HeadVectorView slopes_of_row(const HeadVectorView& slopes, std::int64_t b);

// Keys [begin, end) query row `row` sees under the causal and window masks.
// Both ends never decrease with the row, so a block of rows sees the union
// [keys(first row).begin, keys(last row).end).
RowRange visible_keys(const Problem& p, std::int64_t row);
// Queries [begin, end) that see key row `key`; both ends never decrease with the key.
RowRange seeing_queries(const Problem& p, std::int64_t key);

Strides4 strides_of(const TensorView& t);
Strides3 strides_of(const RowStatsView& t);

// FLOPs by the FlashAttention convention: 2 · B · Hq · (unmasked pairs) · (Dqk + Dv).
double forward_flops(const Problem& p);
double backward_flops(const Problem& p);  // 2.5 × forward
// Number of (query, key) pairs that are not masked, per (batch, head).
double unmasked_pairs(const Problem& p);

}  // namespace flashgen
