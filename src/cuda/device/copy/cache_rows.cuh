// A KV cache read in place by the split-key forward (kKeyCache): the keys
// of batch entry b are its cache's first rows, then the rows the call
// appends (k_new / v_new), which the kernel reads from where the caller put
// them while one CTA per (batch, key/value head) also writes them into the
// cache. A paged cache (kPagedCache) finds each row through the block
// table. The grid is sized for the most keys a cache holds (seq_kv); each
// CTA works on its own entry's count (sequence_params).
#pragma once

#include "common.cuh"
#include "copy/tile_copy.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// The rows of one head of K (or V) of one batch entry, as a gathered source
// of the tile copies (copy/tile_copy.cuh).
template <bool kPaged>
struct CacheRows {
  static constexpr bool kGathered = true;
  // The head's first column in row 0 of the entry's cache (paged: of page
  // 0), and in appended row 0.
  u16* cache;
  const u16* appended;
  index_t row_stride, appended_stride, page_stride;
  const int* pages;      // paged: the entry's row of the block table
  index_t page_step;     // between its entries
  int page_size, num_pages;
  int first;             // the key of row 0
  int cached;            // the entry's cached rows (before the append)
  // An address every launch can read (q's first element) for copies of 0
  // bytes: the cache may hold no row at all (no valid page).
  const u16* readable;

  // Where key `key` lies in the cache (nullptr: a page the table does not name).
  __device__ __forceinline__ u16* cache_row(int key) const {
    if constexpr (!kPaged) {
      return cache + key * row_stride;
    } else {
      const int page = pages[(key / page_size) * page_step];
      if (unsigned(page) >= unsigned(num_pages)) return nullptr;
      return cache + page * page_stride + (key % page_size) * row_stride;
    }
  }
  __device__ __forceinline__ const u16* row(int r) const {
    const int key = first + r;
    if (key >= cached) return appended + (key - cached) * appended_stride;
    return cache_row(key);
  }
  // Rows [r0, r0 + 16) (first + r0 a multiple of 16, so a page holds all
  // of them) as one run, or row by row where they straddle the append or
  // their page is not named.
  __device__ __forceinline__ RowRun run(int r0) const {
    const int key = first + r0;
    if (key >= cached) return {appended + (key - cached) * appended_stride, appended_stride};
    if (key + 16 > cached) return {nullptr, 0};
    return {cache_row(key), row_stride};
  }
  __device__ __forceinline__ const u16* harmless() const { return readable; }
  __device__ __forceinline__ CacheRows from(int key) const {
    CacheRows rows = *this;
    rows.first = first + key;
    return rows;
  }
};

// Keys of batch entry `batch` before the append: its cache_seqlens entry,
// clamped to what its cache holds beside the appended rows.
__device__ __forceinline__ int cached_keys(const AttentionParams& p, int batch) {
  const int stored = p.cache_seqlens[batch * p.cache_seqlens_stride];
  return min_of(max_of(stored, 0), p.seq_kv - p.seq_new);
}

// The parameters as batch entry `batch` sees them: its count of keys, and
// the diagonals measured from it (kernel_args.cpp, place_key_cache).
__device__ __forceinline__ AttentionParams sequence_params(const AttentionParams& p, int batch) {
  AttentionParams s = p;
  const int keys = cached_keys(p, batch) + p.seq_new;
  s.seq_kv = keys;
  s.causal_offset = min_of(p.cache_past_fixed, keys + p.cache_past_relative);
  s.window_offset = p.window_offset + (keys - p.seq_kv);
  s.diagonal_offset = keys - p.seq_q;
  return s;
}

// The rows of tensor t (K or V, with its appended rows) of (batch, head)
// from column col0 that a traversal reads: the tensor's own rows, or with
// C::kKeyCache the entry's cache then its appended rows (`p` the entry's
// sequence_params).
template <class C>
__device__ __forceinline__ auto traversed_rows(const AttentionParams& p, const TensorArg& t,
                                               const TensorArg& appended, int batch, int head,
                                               int col0) {
  if constexpr (!C::kKeyCache) {
    return StridedRows{head_slice<const u16>(t, batch, head) + col0 * t.stride_dim,
                       t.stride_seq};
  } else {
    CacheRows<C::kPagedCache> rows;
    rows.cache = static_cast<u16*>(t.data) + head * t.stride_heads + col0 * t.stride_dim +
                 (C::kPagedCache ? 0 : batch * t.stride_batch);
    rows.appended = head_slice<const u16>(appended, batch, head) + col0 * appended.stride_dim;
    rows.row_stride = t.stride_seq;
    rows.appended_stride = appended.stride_seq;
    rows.page_stride = t.stride_batch;
    rows.pages = p.block_table + batch * p.block_table_stride;
    rows.page_step = p.block_table_column_stride;
    rows.page_size = p.page_size;
    rows.num_pages = p.num_pages;
    rows.first = 0;
    rows.cached = p.seq_kv - p.seq_new;
    rows.readable = static_cast<const u16*>(p.q.data);
    return rows;
  }
}

// Whether this CTA writes its (batch, key/value head)'s appended rows into
// the cache: the first query block, share and column chunk of the group's
// first query head.
__device__ __forceinline__ bool appends_rows(const AttentionParams& p, const CtaTile& tile) {
  return p.seq_new > 0 && tile.row0 == 0 && tile.split == 0 && tile.chunk == 0 &&
         tile.head % p.group_size == 0;
}

// Appended rows of (batch, head) of t (K or V, `dim` columns) written into
// the cache after its cached rows, element by element (a few rows a call).
template <class C>
__device__ __forceinline__ void append_head_rows(const AttentionParams& p, const TensorArg& t,
                                                 const TensorArg& appended, int batch, int head,
                                                 int dim, int thread, int threads) {
  const CacheRows<C::kPagedCache> rows = traversed_rows<C>(p, t, appended, batch, head, 0);
#pragma unroll 1
  for (int e = thread; e < p.seq_new * dim; e += threads) {
    const int i = e / dim, d = e % dim;
    u16* to = rows.cache_row(rows.cached + i);
    if (to != nullptr)
      to[d * t.stride_dim] = rows.appended[i * rows.appended_stride + d * appended.stride_dim];
  }
}

// The appended keys and values of (batch, kv_head) into the cache.
template <class C>
__device__ __forceinline__ void append_to_cache(const AttentionParams& p, int batch, int kv_head,
                                                int thread, int threads) {
  append_head_rows<C>(p, p.k, p.k_new, batch, kv_head, p.dim_qk, thread, threads);
  append_head_rows<C>(p, p.v, p.v_new, batch, kv_head, p.dim_v, thread, threads);
}

}  // namespace flashgen_device
