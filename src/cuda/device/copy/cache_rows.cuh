// A KV cache read in place by the split-key forward (kKeyCache): the keys
// of batch entry b are its cache's first rows, then the rows the call
// appends (k_new / v_new), which the kernel reads from where the caller put
// them while one CTA per (batch, key/value head) also writes them into the
// cache. A paged cache (kPagedCache) finds each row through the block
// table. The grid is sized for the most keys a cache holds (seq_kv); each
// CTA works on its own entry's count (sequence_params). An fp8 cache
// (kFp8Cache) stores e4m3 bytes with a scale per key/value head
// (copy/quantized_cache.cuh reads them).
#pragma once

#include "common.cuh"
#include "copy/tile_copy.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// The rows of one head of K (or V) of one batch entry, as a gathered source
// of the tile copies (copy/tile_copy.cuh; Stored u8: an fp8 cache's, of
// copy/quantized_cache.cuh, which reads cache_row and the appended rows).
template <bool kPaged, class Stored = u16>
struct CacheRows {
  static constexpr bool kGathered = true;
  // The head's first column in row 0 of the entry's cache (paged: of page
  // 0), and in appended row 0.
  Stored* cache;
  const u16* appended;
  index_t row_stride, appended_stride, page_stride;
  index_t col_stride;  // of the cache's and the appended rows alike (the host's rule)
  const int* pages;      // paged: the entry's row of the block table
  index_t page_step;     // between its entries
  int page_size, num_pages;
  int first;             // the key of row 0
  int cached;            // the entry's cached rows (before the append)
  // An address every launch can read (q's first element) for copies of 0
  // bytes: the cache may hold no row at all (no valid page).
  const u16* readable;
  float scale;  // an fp8 cache's, of this head (1 otherwise)

  // Where key `key` lies in the cache (nullptr: a page the table does not name).
  __device__ __forceinline__ Stored* cache_row(int key) const {
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

// Head `head`'s scale of an fp8 cache's keys (kValues: values): one per
// key/value head, one for all (stride 0), or none given (1); 1 for other
// caches (KVCacheForwardArgs::k_scale).
template <class C, bool kValues>
__device__ __forceinline__ float cache_scale(const AttentionParams& p, int head) {
  if constexpr (!C::kFp8Cache) return 1.0f;
  const float* scale = kValues ? p.v_scale : p.k_scale;
  return scale == nullptr ? 1.0f : scale[head * (kValues ? p.v_scale_stride : p.k_scale_stride)];
}

// The rows of K (kValues: V, with their appended rows) of (batch, head)
// from column col0 that a traversal reads: the tensor's own rows, or with
// C::kKeyCache the entry's cache then its appended rows (`p` the entry's
// sequence_params).
template <class C, bool kValues>
__device__ __forceinline__ auto traversed_rows(const AttentionParams& p, int batch, int head,
                                               int col0) {
  const TensorArg& t = kValues ? p.v : p.k;
  if constexpr (!C::kKeyCache) {
    return StridedRows{head_slice<const u16>(t, batch, head) + col0 * t.stride_dim,
                       t.stride_seq};
  } else {
    typedef typename select_type<C::kFp8Cache, u8, u16>::type Stored;
    const TensorArg& appended = kValues ? p.v_new : p.k_new;
    CacheRows<C::kPagedCache, Stored> rows;
    rows.cache = static_cast<Stored*>(t.data) + head * t.stride_heads + col0 * t.stride_dim +
                 (C::kPagedCache ? 0 : batch * t.stride_batch);
    rows.appended = head_slice<const u16>(appended, batch, head) + col0 * appended.stride_dim;
    rows.row_stride = t.stride_seq;
    rows.col_stride = t.stride_dim;
    rows.appended_stride = appended.stride_seq;
    rows.page_stride = t.stride_batch;
    rows.pages = p.block_table + batch * p.block_table_stride;
    rows.page_step = p.block_table_column_stride;
    rows.page_size = p.page_size;
    rows.num_pages = p.num_pages;
    rows.first = 0;
    rows.cached = p.seq_kv - p.seq_new;
    rows.readable = static_cast<const u16*>(p.q.data);
    rows.scale = cache_scale<C, kValues>(p, head);
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

// An appended element x (16-bit, of type E) as an fp8 cache stores it:
// x / scale rounded to e4m3 (append_head_rows writes it, the quantized
// copy attends it).
template <int E>
__device__ __forceinline__ u8 stored_as_e4m3(u16 x, float scale) {
  return float_to_e4m3(to_float<E>(x) / scale);
}

// Appended rows of (batch, head) of K (kValues: V; `dim` columns) written
// into the cache after its cached rows, element by element (a few rows a
// call); into an fp8 cache as x / scale rounded to e4m3.
template <class C, bool kValues>
__device__ __forceinline__ void append_head_rows(const AttentionParams& p, int batch, int head,
                                                 int dim, int thread, int threads) {
  const auto rows = traversed_rows<C, kValues>(p, batch, head, 0);
  const index_t appended_col_stride = (kValues ? p.v_new : p.k_new).stride_dim;
#pragma unroll 1
  for (int e = thread; e < p.seq_new * dim; e += threads) {
    const int i = e / dim, d = e % dim;
    auto* to = rows.cache_row(rows.cached + i);
    if (to == nullptr) continue;
    const u16 x = rows.appended[i * rows.appended_stride + d * appended_col_stride];
    if constexpr (C::kFp8Cache)
      to[d * rows.col_stride] = stored_as_e4m3<C::kElement>(x, rows.scale);
    else
      to[d * rows.col_stride] = x;
  }
}

// The appended keys and values of (batch, kv_head) into the cache.
template <class C>
__device__ __forceinline__ void append_to_cache(const AttentionParams& p, int batch, int kv_head,
                                                int thread, int threads) {
  append_head_rows<C, false>(p, batch, kv_head, p.dim_qk, thread, threads);
  append_head_rows<C, true>(p, batch, kv_head, p.dim_v, thread, threads);
}

}  // namespace flashgen_device
