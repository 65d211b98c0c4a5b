// Which tile of the output a CTA computes. Every kernel is launched on the
// grid (row blocks, heads, batch × head chunks), a causal kernel on (heads,
// row blocks, batch × head chunks) (tile_cell): the block of rows the CTA
// owns (query rows for the forward and dQ, key rows for dK and dV), the head
// those rows belong to (a query head; a key/value head for dK and dV), the
// batch row and which of the output's column chunks (the CTAs that split a
// wide head) it writes. This is the one place that reads blockIdx, and
// where the persistent forward's CTAs find the tiles they walk instead
// (walked_query_tile). (The indices are divided unsigned, as blockIdx is:
// cheaper than signed division.)
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
// `block` is the CTA's index in a grid `grid_y` blocks high.
template <bool kCausal, bool kLastRowsHeaviest>
__device__ __forceinline__ uint3 tile_cell(uint3 block, unsigned grid_y) {
  if constexpr (!kCausal)
    return block;
  else
    return make_uint3(kLastRowsHeaviest ? grid_y - 1 - block.y : block.y, block.x, block.z);
}
template <bool kCausal, bool kLastRowsHeaviest>
__device__ __forceinline__ uint3 tile_cell() {
  return tile_cell<kCausal, kLastRowsHeaviest>(blockIdx, gridDim.y);
}

// A persistent kernel's CTAs walk the tiles of the grid a CTA each would
// have had (AttentionParams::tile_grid_x, _y): tile t is the block whose
// linear index is t (x fastest), so the tiles start in the order that
// grid's CTAs would have (heaviest first under a causal mask). The walk
// goes in passes of gridDim.x tiles, CTA c taking the c-th of an even pass
// and the c-th from the end of an odd one: under a causal mask the CTA
// that had a pass's heaviest tile gets the next pass's lightest, which
// evens out the CTAs' work as the grid's hardware order does (a walk of
// tiles c, c + gridDim.x, ... left the first CTAs ~30% more work than the
// mean at 2.7 tiles per CTA). Past the last tile, every later step is too.
__device__ __forceinline__ unsigned walk_step_tile(unsigned step) {
  const unsigned pass_first = step * gridDim.x;
  return pass_first + ((step & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
}
__device__ __forceinline__ uint3 walked_block(const AttentionParams& p, unsigned tile) {
  const unsigned plane = tile / p.tile_grid_x;
  return make_uint3(tile % p.tile_grid_x, plane % p.tile_grid_y, plane / p.tile_grid_y);
}

// A tile of kBlockRows query rows: head is a query head, reading kv_head.
// kSplitKeys: the row-block axis counts (query block, share of the keys)
// pairs, the shares of one block adjacent. `cell`: tile_cell's.
template <int kBlockRows, int kChunks, bool kSplitKeys = false>
__device__ __forceinline__ CtaTile query_tile_of(const AttentionParams& p, uint3 cell) {
  const int head = cell.y;
  const unsigned block = kSplitKeys ? cell.x / unsigned(p.key_splits) : cell.x;
  const int split = kSplitKeys ? int(cell.x % unsigned(p.key_splits)) : 0;
  return {int(block * kBlockRows), head, head / p.group_size, int(cell.z / kChunks),
          int(cell.z % kChunks), split};
}
template <int kBlockRows, int kChunks, bool kSplitKeys = false, bool kCausal = false>
__device__ __forceinline__ CtaTile query_tile(const AttentionParams& p) {
  return query_tile_of<kBlockRows, kChunks, kSplitKeys>(p, tile_cell<kCausal, true>());
}
// Tile `tile` of a persistent kernel's walk.
template <int kBlockRows, bool kCausal>
__device__ __forceinline__ CtaTile walked_query_tile(const AttentionParams& p, unsigned tile) {
  return query_tile_of<kBlockRows, 1>(
      p, tile_cell<kCausal, true>(walked_block(p, tile), p.tile_grid_y));
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
