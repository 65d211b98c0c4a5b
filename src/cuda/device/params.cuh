// The flat argument block of every attention kernel. Plain C++ with no
// includes: the host (src/cuda/) and the device (NVRTC) both compile it, so the
// two sides cannot disagree on a field.
#pragma once

namespace flashgen_device {

typedef long long index_t;  // element offsets: tensors may exceed 2^31 elements

// Arrays a user mask may read (Options::mask_tensors) on the GPU.
constexpr int kMostMaskArrays = 8;
// Queries (and keys) per cell of the user mask's block ranges.
constexpr int kMaskCell = 16;

// The first pair whose mask expression faulted (an index outside its array,
// an integer division by zero): written once by the mask_blocks kernel,
// read by the host, which evaluates that pair again to word the error.
// The first pair whose evaluation faulted, in the order of (slot, q_idx,
// key) as one number ((slot · (rows_q + rows_kv) + q_idx + rows_q) · rows_kv
// + key, rows_* the cells' extents mask_rows_q and mask_rows_kv), kept
// inverted so that atomicMax over zeros finds it: 0 means no fault.
struct MaskFault {
  unsigned long long inverted_first;
};

// Warps of the combine kernel (forward_combine) per query row: a row of many
// shares (a long decode step over few heads: a few rows, tens of shares) is
// merged by several warps of one CTA, each over every `parts`-th share, so
// that its shares are read by more SMs at once. A power of two up to the
// CTA's 8 warps, so a row's warps share their CTA; the host launches
// rows x parts warps.
constexpr int combine_warps_per_row(int key_splits) {
  return key_splits >= 64 ? 8 : key_splits >= 32 ? 4 : key_splits >= 16 ? 2 : 1;
}

// One [batch, seq, heads, dim] tensor: base pointer and element strides.
struct TensorArg {
  void* data;
  index_t stride_batch, stride_seq, stride_heads, stride_dim;
};

// One fp32 [batch, heads, seq] tensor.
struct RowStatsArg {
  float* data;  // null: not written (forward LSE is optional)
  index_t stride_batch, stride_heads, stride_seq;
};

struct AttentionParams {
  TensorArg q, k, v, o;        // forward inputs and output
  TensorArg grad_o;            // backward: dO
  TensorArg grad_q, grad_k, grad_v;
  RowStatsArg lse;             // natural-log log-sum-exp per query row
  RowStatsArg dterm;           // backward: rowsum(dO * O) per query row
  float* grad_q_accum;         // atomic backward: fp32 dQ [batch, heads_q, seq_q, dim_qk] packed
  int batch, seq_q, seq_kv, heads_q, heads_kv, group_size;
  int dim_qk, dim_v;           // the user's sizes (kernels pad internally, never in memory)
  // Query i sees keys j <= i + causal_offset (kCausal: causal, or a sliding
  // window's right edge); window_offset below (softmax/mask.cuh).
  int causal_offset;
  float scale;                 // softmax scale on Q·Kᵀ
  float scale_log2;            // scale · log2(e): softmax runs in base 2
  // The split-key forward (KernelSpec::split_keys): key_splits CTAs per query
  // block, each over its share of the key blocks, write fp32 partial results,
  // which the combine kernel merges: partial_o [split][batch][heads_q][seq_q]
  // [dim_v] (normalized by the share's own sum) and partial_lse [split][batch]
  // [heads_q][seq_q], both packed.
  int key_splits;
  float* partial_o;
  float* partial_lse;
  // Query i sees keys j >= i + window_offset (kWindow: a sliding window's
  // left edge).
  int window_offset;
  // The soft cap c (kSoftcap): logits c·tanh(s·scale / c), kept as scale / c,
  // c·log2(e) and its inverse.
  float softcap_scale, softcap_log2, softcap_inverse_log2;
  // Sinks (kSinks): an fp32 logit per query head, sinks[head · sinks_stride],
  // in each row's softmax denominator; the backward writes dL/dsink to
  // grad_sinks[head · grad_sinks_stride].
  const float* sinks;
  index_t sinks_stride;
  // Query heads packed as rows (decode): row r's sink is r·sinks_row_stride
  // past its head's (the combine reads it); 0 otherwise.
  index_t sinks_row_stride;
  float* grad_sinks;
  index_t grad_sinks_stride;
  // ALiBi (kAlibi): logits less slope·|i + diagonal_offset − j|·log2(e), the
  // slope of (batch, head) at alibi_slopes[batch · alibi_stride_batch +
  // head · alibi_stride_heads] (stride_batch 0 for one slope per head).
  const float* alibi_slopes;
  index_t alibi_stride_batch, alibi_stride_heads;
  int diagonal_offset;  // seq_kv − seq_q
  // The user mask (kMask, softmax/user_mask.cuh). Its arrays, array k read as
  // mask_arrays[k][i · mask_array_strides[k]] for 0 <= i < mask_array_sizes[k]
  // (int32 or fp32, as the generated expression says); the b of batch entry 0.
  const void* mask_arrays[kMostMaskArrays];
  index_t mask_array_sizes[kMostMaskArrays], mask_array_strides[kMostMaskArrays];
  int mask_batch0;
  // The cells of kMaskCell queries or keys that hold an attended pair, per
  // slot (batch % mask_batch_slots, head % mask_head_slots: one slot where
  // the expression reads neither b nor h): for each query cell its key cells
  // and for each key cell its query cells, as {cells − first, end} (0, 0:
  // none), written by the mask_blocks kernel with atomicMax from zeros.
  int* mask_key_cells;    // [slot][query cell][2]
  int* mask_query_cells;  // [slot][key cell][2]
  // For each query cell, a bit per key cell (bit c % 32 of word c / 32):
  // set where the mask attends every pair the diagonals leave (also where
  // they leave none). Blocks of such cells skip the mask's evaluation.
  unsigned* mask_full_cells;  // [slot][query cell][ceil(key cells / 32)]
  int mask_batch_slots, mask_head_slots;
  MaskFault* mask_fault;  // null: faults are not recorded (the attention kernels)
  // A KV cache read in place (the split-key forward with kKeyCache,
  // copy/cache_rows.cuh). seq_kv is the rows a sequence's cache holds;
  // batch entry b sees its cache's first cache_seqlens[b ·
  // cache_seqlens_stride] rows (clamped to [0, seq_kv − seq_new]), then the
  // seq_new rows of k_new / v_new ([batch, seq_new, heads_kv, dim]), which
  // one CTA per (batch, key/value head) also writes into the cache after
  // them. Its past-diagonal offset is min(cache_past_fixed, keys +
  // cache_past_relative) for its count of keys. Paged (kPagedCache): k and v
  // are [num_pages, page_size, heads_kv, dim] (stride_batch steps pages), key
  // t of entry b is row t % page_size of page block_table[b ·
  // block_table_stride + t / page_size · block_table_column_stride]; an
  // entry outside [0, num_pages) is never dereferenced (its rows read as
  // zeros, appends to it are dropped).
  const int* cache_seqlens;
  index_t cache_seqlens_stride;
  TensorArg k_new, v_new;
  int seq_new;
  int cache_past_fixed, cache_past_relative;
  const int* block_table;
  index_t block_table_stride, block_table_column_stride;
  int page_size, num_pages;
  // A persistent forward (schedule=persistent) runs fewer CTAs than tiles:
  // the grid a CTA per tile would have had (its x and y extents) and its
  // count of tiles, which the CTAs walk (scheduler/cta_tile.cuh). Last, so
  // that no other field moves.
  unsigned tile_grid_x, tile_grid_y, tile_count;
  // An fp8 KV cache's scales (kFp8Cache): key/value head h's at k_scale[h ·
  // k_scale_stride] (stride 0: one for all heads; null: 1), the same for v.
  const float* k_scale;
  const float* v_scale;
  index_t k_scale_stride, v_scale_stride;
  // Packed sequences (varlen, scheduler/sequences.cuh): batch entry b's query
  // rows are rows [q_begin[b], q_begin[b + 1]) of q, o, dO, dQ and the LSE
  // (whose tensors' batch strides are 0), its keys rows [k_begin[b],
  // k_begin[b + 1]) of k, v, dK and dV (offsets taken at a stride of
  // *_begin_stride, clamped to [0, total_q] and [0, total_kv]); seq_q and
  // seq_kv are the grid's most rows of any sequence. Each sequence measures
  // its diagonals from its own lengths (sq, sk): past = min(past_fixed,
  // sk − sq + past_relative), before = sk − sq + before_relative.
  const int* q_begin;
  const int* k_begin;
  index_t q_begin_stride, k_begin_stride;
  int total_q, total_kv;
  int sequence_past_fixed, sequence_past_relative, sequence_before_relative;
  // A sequence's first query and key rows in the packed tensors (0 for the
  // problem itself): where TMA, which reads the packed tensors through their
  // own maps, finds the sequence's rows.
  int sequence_q_row0, sequence_kv_row0;
  // The query and key positions the user mask's cells are laid out for: the
  // grid's seq_q and seq_kv, which a packed sequence or a KV-cache entry
  // (whose own seq_q and seq_kv may be fewer) indexes its slot's cells by.
  int mask_rows_q, mask_rows_kv;
};

// A TMA descriptor (CUtensorMap of the driver API: 128 opaque bytes, 64-byte
// aligned), encoded on the host for one tensor and passed as a
// __grid_constant__ kernel parameter.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// The tensor maps of a kernel whose producer copies its traversed tiles with
// TMA (copy=tma): K and V for the forward, Q and dO for the key/value
// backward, K and V for the query backward. Each tensor twice: viewed as
// [batch][heads][seq][dim], in boxes of tma_slice_columns() columns by the
// traversed block's rows (view); and its whole slices viewed as
// [batch][heads][slice][seq][column], a slice's columns adjacent and the
// slices a slice's width apart, in one box of all of them by the block's
// rows (sliced: zero where the tensor has no whole slice), which TMA writes
// as the per-slice boxes one after the other.
struct TraversedTensorMaps {
  // Each member by tensor: [0] the first traversed tensor's, [1] the second's.
  TensorMap view[2];
  TensorMap sliced[2];
  // Token rows (tensor_maps.hpp): a head's tile copied in one box of the
  // sliced token-row view, of as many slices as the head's columns span
  // from the slice boundary before its first: sliced[i] in boxes of
  // box_slices[i] slices, the fewest a head spans, sliced_wide[i] in boxes
  // of wide_slices[i] (one more: heads whose columns start late in their
  // first slice); 0 where no such map was encoded. Past a row's whole
  // slices (row_slices[]) a head's tile is copied a slice at a time.
  TensorMap sliced_wide[2];
  int box_slices[2], wide_slices[2], row_slices[2];
};

// Columns of one TMA box (a "slice" of a tile) for tiles with this swizzle
// (TuningParams::swizzle): 8 (16 bytes a row) in the no-swizzle core-matrix
// layout; 16 (32 bytes, the swizzle's span) in the 32-byte-swizzled one. The
// host encodes the maps' boxes and the kernels step their tiles by it.
constexpr int tma_slice_columns(int swizzle) { return swizzle == 32 ? 16 : 8; }

}  // namespace flashgen_device
