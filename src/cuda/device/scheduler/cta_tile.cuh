// Which tile of the output a CTA computes. Every kernel is launched on the
// grid (row blocks, heads, batch × head chunks), a causal kernel on (heads,
// row blocks, batch × head chunks) (tile_cell): the block of rows the CTA
// owns (query rows for the forward and dQ, key rows for dK and dV), the head
// those rows belong to (a query head; a key/value head for dK and dV), the
// batch row and which of the output's column chunks (the CTAs that split a
// wide head) it writes. This is the one place that reads blockIdx,
// so that handing tiles out another way (a persistent tile loop) changes it
// alone. (The indices are divided unsigned, as blockIdx is: cheaper than
// signed division.)
#pragma once

#include "common.cuh"
#include "params.cuh"
#include "scheduler/block_ranges.cuh"

namespace flashgen_device {

struct CtaTile {
  int row0;     // first row of the CTA's block
  int head;     // the head of its rows
  int kv_head;  // the key/value head that head reads (head itself for dK, dV)
  int batch;
  int chunk;    // which of the kChunks column chunks of the output
  int split;    // which share of the keys (split-key forward; 0 otherwise)
};

// The grid's cell of this CTA's tile. The GPU starts a grid's CTAs in the
// order of their linear index, x fastest. Under a causal mask the row blocks
// differ in work (a query block sees more keys the later it is, a key block
// is seen by more queries the earlier it is), so a causal kernel's grid is
// laid out (heads, row blocks, batch × chunks) instead (block_grid on the
// host): the heads of one row block are neighbours, so the query heads of a
// GQA group read the same keys at the same time, and the row blocks are
// handed out heaviest first, so the lightest fill the last wave's gaps.
// Special registers only, which the compiler rereads rather than holding
// them (a run-time choice of layout made register-bound kernels spill).
template <bool kCausal, bool kLastRowsHeaviest>
__device__ __forceinline__ uint3 tile_cell() {
  if constexpr (!kCausal)
    return blockIdx;
  else
    return make_uint3(kLastRowsHeaviest ? gridDim.y - 1 - blockIdx.y : blockIdx.y, blockIdx.x,
                      blockIdx.z);
}

// A tile of kBlockRows query rows: head is a query head, reading kv_head.
// kSplitKeys: the row-block axis counts (query block, share of the keys)
// pairs, the shares of one block adjacent.
template <int kBlockRows, int kChunks, bool kSplitKeys = false, bool kCausal = false>
__device__ __forceinline__ CtaTile query_tile(const AttentionParams& p) {
  const uint3 cell = tile_cell<kCausal, true>();
  const int head = cell.y;
  const unsigned block = kSplitKeys ? cell.x / unsigned(p.key_splits) : cell.x;
  const int split = kSplitKeys ? int(cell.x % unsigned(p.key_splits)) : 0;
  return {int(block * kBlockRows), head, head / p.group_size, int(cell.z / kChunks),
          int(cell.z % kChunks), split};
}

// The key blocks of share `split` of a query block that sees `blocks`:
// equal shares in order, the last ones possibly empty.
template <bool kSplitKeys>
__device__ __forceinline__ BlockRange key_block_share(const AttentionParams& p, BlockRange blocks,
                                                      int split) {
  if (!kSplitKeys) return blocks;
  const int per_share = ceil_div(blocks.count(), p.key_splits);
  const int first = min_of(blocks.end, blocks.first + split * per_share);
  return {first, min_of(blocks.end, first + per_share)};
}

// A tile of kBlockRows key rows of a key/value head.
template <int kBlockRows, int kChunks, bool kCausal = false>
__device__ __forceinline__ CtaTile key_tile() {
  const uint3 cell = tile_cell<kCausal, false>();
  const int kv_head = cell.y;
  return {int(cell.x * kBlockRows), kv_head, kv_head, int(cell.z / kChunks),
          int(cell.z % kChunks), 0};
}

}  // namespace flashgen_device
