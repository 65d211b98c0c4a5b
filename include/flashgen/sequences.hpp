// flashgen — batches of sequences of different lengths: packed (varlen)
// sequences for training and prefill, and a KV cache for decoding.
//
// Varlen: the sequences' tokens lie one after another along the seq axis of
// tensors whose batch extent is 1, and cu_seqlens (int32 [batch + 1],
// cumulative lengths, starting at 0) say where each sequence begins:
//   q  [1, total_q, heads_q,  dim_qk]   sequence b: rows [cu_seqlens_q[b], cu_seqlens_q[b + 1])
//   k  [1, total_k, heads_kv, dim_qk]   sequence b: rows [cu_seqlens_k[b], cu_seqlens_k[b + 1])
//   v  [1, total_k, heads_kv, dim_v]
//   o  [1, total_q, heads_q,  dim_v]
//   lse (fp32) [1, heads_q, total_q]    (flash-attn's [heads_q, total_q])
// Each sequence attends only to its own keys; causal is aligned bottom-right
// per sequence (query i of a sequence of lengths (sq, sk) sees keys
// j <= i + sk - sq).
//
// KV cache: q [batch, seq_q, heads_q, dim_qk] attends to the first
// cache_seqlens[b] rows of its sequence's cache, plus seq_new rows of k_new /
// v_new that the call first writes into the cache at positions
// cache_seqlens[b] ... (flash_attn_with_kvcache's k=, v=). The cache is
// either contiguous, [batch, seq_cache, heads_kv, dim], or paged,
// [num_pages, page_size, heads_kv, dim] with block_table [batch, max_pages]:
// position t of sequence b is row t % page_size of page
// block_table[b][t / page_size]. Causal is bottom-right against the
// sequence's length after the append.
//
// Both: a query row that sees no key (an empty sequence, cache_seqlens 0 with
// no append, a causal row before the first key) gives o = 0 and lse = -inf.
// Nothing the caller passed is modified, except the cache by an append.
#pragma once

#include <cstdint>

#include "flashgen/flashgen.hpp"

namespace flashgen {

// int32 indices (cu_seqlens, cache_seqlens, block_table), rank 1 or 2;
// strides count elements. A rank-1 view has shape[1] == 1.
struct IndexView {
  const std::int32_t* data = nullptr;
  std::int64_t shape[2] = {0, 1};
  std::int64_t stride[2] = {1, 1};
  MemoryKind memory = MemoryKind::host;
  int device = 0;

  // Packed [size].
  static IndexView vector(const std::int32_t* data, std::int64_t size,
                          MemoryKind memory = MemoryKind::host, int device = 0);
  // Packed row-major [rows, columns].
  static IndexView matrix(const std::int32_t* data, std::int64_t rows, std::int64_t columns,
                          MemoryKind memory = MemoryKind::host, int device = 0);
  std::int32_t at(std::int64_t i, std::int64_t j = 0) const {
    return data[i * stride[0] + j * stride[1]];
  }
};

// Packed [1, tokens, heads, dim] (the layout of flash_attn_varlen_func's
// [total, heads, dim] tensors).
TensorView packed_tokens(void* data, DType dtype, std::int64_t tokens, std::int64_t heads,
                         std::int64_t dim, MemoryKind memory = MemoryKind::host, int device = 0);

struct VarlenForwardArgs {
  TensorView q, k, v;
  TensorView o;       // output
  RowStatsView lse;   // output (optional: data == nullptr does not write it)
  // [batch + 1], in host memory or on the tensors' device.
  IndexView cu_seqlens_q, cu_seqlens_k;
  // At least the longest sequence; the GPU kernels size their grids by them.
  std::int64_t max_seqlen_q = 0, max_seqlen_k = 0;
  // cu_seqlens on the GPU: true copies them to the host and checks them (and
  // the max_seqlens) as host ones before anything runs (the call waits for
  // options.stream, so it cannot be captured in a CUDA graph); false (the
  // default) leaves them to the kernels.
  bool check_indices = false;
};

struct VarlenBackwardArgs {
  TensorView q, k, v, o, grad_o;
  RowStatsView lse;                   // from the forward
  TensorView grad_q, grad_k, grad_v;  // outputs
  IndexView cu_seqlens_q, cu_seqlens_k;
  std::int64_t max_seqlen_q = 0, max_seqlen_k = 0;
  bool check_indices = false;  // as VarlenForwardArgs'
};

struct KVCacheForwardArgs {
  TensorView q;                 // [batch, seq_q, heads_q, dim_qk]
  TensorView k_cache, v_cache;  // contiguous or paged (see above); written by an append
  IndexView cache_seqlens;      // [batch]: rows of each sequence's cache before the call
  IndexView block_table;        // [batch, max_pages]; data == nullptr: contiguous cache
  // [batch, seq_new, heads_kv, dim]: rows appended before attending; both
  // with data == nullptr append nothing.
  TensorView k_new, v_new;
  // An fp8 cache (k_cache and v_cache of DType::e4m3; q, o, k_new, v_new of
  // the dtype attention computes in): each element stands for its value
  // times its scale (the CPU backend rounds that to the dtype before
  // attention, as a computation in the dtype holds it; the GPU's kernels
  // take the e4m3 value exactly, in f16, and apply the scale to the scores
  // and outputs in fp32); an appended
  // element x is stored as x / scale rounded to e4m3 (to nearest, ±448 at
  // most) and attended as stored. fp32 [1] (one scale) or [heads_kv] (one
  // per key/value head); not given: 1. Only with e4m3 caches.
  HeadVectorView k_scale, v_scale;
  TensorView o;      // output [batch, seq_q, heads_q, dim_v]
  RowStatsView lse;  // output [batch, heads_q, seq_q] (optional)
  // CUDA tensors: true copies cache_seqlens and block_table to the host and
  // checks them as for host tensors before anything runs (the call waits
  // for options.stream, so it cannot be captured in a CUDA graph); false
  // (the default) leaves them to the kernels.
  bool check_indices = false;
};

// Page sizes of a paged cache are multiples of this (the kernels' tile granularity).
inline constexpr std::int64_t kPageSizeMultiple = 16;

// Throw flashgen::Error on bad input or failure (the message names the
// argument and the rule). The options apply per sequence; options.grad_sinks
// gets dL/dsink summed over the sequences; ALiBi slopes of shape [batch,
// heads_q] have a row per sequence.
// CUDA tensors with cu_seqlens on their device: forward_varlen and
// backward_varlen launch each kernel once for the whole batch on
// options.stream, and the kernels read the offsets themselves: the host
// waits for nothing, so a training step can be captured in a CUDA graph.
// There the offsets are not checked unless check_indices is set: the
// kernels clamp them to the packed tensors (no byte outside them is read
// or written), a sequence longer than max_seqlen is cut to it, and the
// rows cut off are not written. With cu_seqlens in host memory (read as
// they are, checked), the plain kernels run once per sequence;
// backward_varlen refuses options.sinks there (dL/dsink is summed on the
// host). forward_with_kvcache runs one
// forward on options.stream whose kernels read cache_seqlens and
// block_table (on the tensors' device) themselves, append and attend: the
// host waits for nothing, so a decode step can be captured in a CUDA graph.
// There a length is clamped to what the cache holds (seq_cache, or max_pages
// · page_size, less seq_new) and a block_table entry outside [0, num_pages)
// is never dereferenced (its rows read as zeros, appends to it are dropped);
// host tensors get an error for either instead. float32 tensors with a
// cache run on host tensors only (ErrorCode::unsupported). A mask
// expression's b is the sequence, q_idx and kv_idx positions within it
// (kv_idx counting cache positions), on every path.
void forward_varlen(const VarlenForwardArgs& args, const Options& options = {});
void backward_varlen(const VarlenBackwardArgs& args, const Options& options = {});
void forward_with_kvcache(const KVCacheForwardArgs& args, const Options& options = {});

}  // namespace flashgen
