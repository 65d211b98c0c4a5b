// Memory moves of the KV cache for the CPU backend: the append (new rows
// written into the cache at each sequence's length) and, for a paged cache,
// one sequence's rows gathered page by page into a packed buffer that the
// flash forward then reads like any [1, rows, heads, dim] tensor. Bytes are
// copied as they are where the cache and the new rows share a dtype; an fp8
// (e4m3) cache is converted with its scale on the way in and out.
#pragma once

#include <cstdint>
#include <vector>

#include "flashgen/sequences.hpp"

namespace flashgen::cpu {

// Where the rows of each sequence lie: a contiguous cache [batch, seq_cache,
// heads, dim] (block_table == nullptr), or pages [num_pages, page_size,
// heads, dim] with row t of sequence b in page block_table[b][t / page_size].
struct CacheRows {
  const TensorView& cache;
  const IndexView* block_table = nullptr;
  std::int64_t page_size = 0;
  // An e4m3 cache's scale ([1] or [heads], host memory); none given: 1.
  const HeadVectorView* scale = nullptr;
};

// Head h's scale of an e4m3 cache: scale[0] for one scale ([1]), scale[h]
// for one per head; 1 where none is given (nullptr or no data).
float cache_scale(const HeadVectorView* scale, std::int64_t h);

// cache rows [lengths[b], lengths[b] + seq_new) of sequence b = rows[b, :]
// (into an e4m3 cache: rows / scale, rounded), for every b; rows is [batch,
// seq_new, heads, dim]. Validated: every row written lies in the cache.
void append_rows(const CacheRows& where, const TensorView& rows,
                 const std::vector<std::int64_t>& lengths);

// Rows [0, count) of sequence b, packed [count, heads, dim] into `buffer`
// in dtype `into` (from an e4m3 cache: value · scale rounded to it);
// returns the [1, count, heads, dim] view of it.
TensorView gather_rows(const CacheRows& where, std::int64_t b, std::int64_t count,
                       std::vector<unsigned char>& buffer, DType into);

}  // namespace flashgen::cpu
