// Which blocks a traversal visits: those the mask's two diagonals leave
// (softmax/mask.cuh has the diagonals), and with a user mask only those
// between the first and the last attended cell that the mask_blocks kernel
// recorded (kernels/mask_blocks.cuh).
#pragma once

#include "common.cuh"
#include "params.cuh"

namespace flashgen_device {

// Blocks [first, end) of a traversal (key blocks of a query tile, or query
// blocks of a key tile), first <= end.
struct BlockRange {
  int first, end;
  __device__ __forceinline__ int count() const { return end - first; }
};

// Blocks of a traversal where the first lies after the end when empty.
__device__ __forceinline__ BlockRange intersect(BlockRange a, BlockRange b) {
  const int end = min_of(a.end, b.end);
  return {min_of(end, max_of(a.first, b.first)), end};
}

// Key blocks of kBlockN that the diagonals leave to query rows [row0,
// row0 + rows): under the causal diagonal those up to the diagonal of the
// last row (none when that row sees no key), under the window's left edge
// those from the edge of the first row on.
template <class C, int kBlockN>
__device__ __forceinline__ BlockRange diagonal_key_blocks(const AttentionParams& p, int row0,
                                                          int rows) {
  int end = ceil_div(p.seq_kv, kBlockN);
  if (C::kCausal) {
    const int last_key = min_of(row0 + rows - 1, p.seq_q - 1) + p.causal_offset;
    end = min_of(end, last_key < 0 ? 0 : ceil_div(last_key + 1, kBlockN));
  }
  int first = 0;
  if (C::kWindow) first = min_of(end, max_of(0, row0 + p.window_offset) / kBlockN);
  return {first, end};
}

// Query blocks of kBlockN that the diagonals leave to keys [key0, key0 +
// keys): key j is seen by queries i >= j - causal_offset (causal) and
// i <= j - window_offset (window).
template <class C, int kBlockN>
__device__ __forceinline__ BlockRange diagonal_query_blocks(const AttentionParams& p, int key0,
                                                            int keys) {
  int end = ceil_div(p.seq_q, kBlockN);
  if (C::kWindow) {
    const int last_query = key0 + keys - 1 - p.window_offset;
    end = min_of(end, last_query < 0 ? 0 : last_query / kBlockN + 1);
  }
  const int first = C::kCausal ? min_of(end, max_of(0, key0 - p.causal_offset) / kBlockN) : 0;
  return {first, end};
}

// A user mask's cells along the queries and along the keys, as the grid's
// extents laid them out.
__device__ __forceinline__ int mask_query_cells(const AttentionParams& p) {
  return ceil_div(p.mask_rows_q, kMaskCell);
}
__device__ __forceinline__ int mask_key_cells(const AttentionParams& p) {
  return ceil_div(p.mask_rows_kv, kMaskCell);
}

// Words of 32 key cells per query cell in params.mask_full_cells.
__device__ __forceinline__ int mask_full_words(const AttentionParams& p) {
  return ceil_div(mask_key_cells(p), 32);
}

// The user mask's slot of (batch, head) in its cell ranges.
__device__ __forceinline__ int mask_slot(const AttentionParams& p, int batch, int head) {
  return batch % p.mask_batch_slots * p.mask_head_slots + head % p.mask_head_slots;
}

// Blocks of kBlockN on the other side that hold the attended pairs of own
// rows [row0, row0 + rows) in (batch, head), by the user mask's cells: key
// blocks of query rows (kOwnQueries), else query blocks of keys. Each own
// cell has {other_cells − first, end} in its slot's ranges; {0, 0} when
// there are none.
template <int kBlockN, bool kOwnQueries>
__device__ __forceinline__ BlockRange attended_blocks(const AttentionParams& p, int batch,
                                                      int head, int row0, int rows) {
  const int own_cells = kOwnQueries ? mask_query_cells(p) : mask_key_cells(p);
  const int other_cells = kOwnQueries ? mask_key_cells(p) : mask_query_cells(p);
  const int* cells = (kOwnQueries ? p.mask_key_cells : p.mask_query_cells) +
                     2 * mask_slot(p, batch, head) * own_cells;
  int first = other_cells, end = 0;
  const int last = min_of(ceil_div(row0 + rows, kMaskCell), own_cells);
  for (int c = row0 / kMaskCell; c < last; ++c) {
    first = min_of(first, other_cells - cells[2 * c]);
    end = max_of(end, cells[2 * c + 1]);
  }
  if (end <= first) return {0, 0};
  return {first * kMaskCell / kBlockN, ceil_div(end * kMaskCell, kBlockN)};
}

// Key blocks of kBlockN a CTA owning query rows [row0, row0 + rows) of
// (batch, head) traverses: those the diagonals leave, and with a user mask
// only those from the rows' first attended key to their last.
template <class C, int kBlockN>
__device__ __forceinline__ BlockRange key_blocks_for_rows(const AttentionParams& p, int row0,
                                                          int rows, int batch, int head) {
  const BlockRange blocks = diagonal_key_blocks<C, kBlockN>(p, row0, rows);
  if constexpr (!C::kMask) return blocks;
  return intersect(blocks, attended_blocks<kBlockN, true>(p, batch, head, row0, rows));
}

// Query blocks of kBlockN that see keys [key0, key0 + keys) of key/value
// head kv_head, in any query head of its group: those the diagonals leave,
// and with a user mask only those from the group's first attended query to
// its last.
template <class C, int kBlockN>
__device__ __forceinline__ BlockRange query_blocks_for_keys(const AttentionParams& p, int key0,
                                                            int keys, int batch, int kv_head) {
  const BlockRange blocks = diagonal_query_blocks<C, kBlockN>(p, key0, keys);
  if constexpr (!C::kMask) return blocks;
  BlockRange seen = {mask_query_cells(p), 0};
  for (int g = 0; g < p.group_size; ++g) {
    const BlockRange head =
        attended_blocks<kBlockN, false>(p, batch, kv_head * p.group_size + g, key0, keys);
    if (head.count() > 0) seen = {min_of(seen.first, head.first), max_of(seen.end, head.end)};
  }
  return intersect(blocks, seen);
}

}  // namespace flashgen_device
