// Which tile of the output a CTA computes. Every kernel is launched on the
// grid (row blocks, heads, batch × head chunks): x the block of rows the CTA
// owns (query rows for the forward and dQ, key rows for dK and dV), y the
// head those rows belong to (a query head; a key/value head for dK and dV),
// z the batch row and which of the output's column chunks (the CTAs that
// split a wide head) it writes. This is the one place that reads blockIdx,
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

// A tile of kBlockRows query rows: head is a query head, reading kv_head.
// kSplitKeys: x counts (query block, share of the keys) pairs, the shares of
// one block adjacent.
template <int kBlockRows, int kChunks, bool kSplitKeys = false>
__device__ __forceinline__ CtaTile query_tile(const AttentionParams& p) {
  const int head = blockIdx.y;
  const unsigned block = kSplitKeys ? blockIdx.x / unsigned(p.key_splits) : blockIdx.x;
  const int split = kSplitKeys ? int(blockIdx.x % unsigned(p.key_splits)) : 0;
  return {int(block * kBlockRows), head, head / p.group_size, int(blockIdx.z / kChunks),
          int(blockIdx.z % kChunks), split};
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
template <int kBlockRows, int kChunks>
__device__ __forceinline__ CtaTile key_tile() {
  const int kv_head = blockIdx.y;
  return {int(blockIdx.x * kBlockRows), kv_head, kv_head, int(blockIdx.z / kChunks),
          int(blockIdx.z % kChunks), 0};
}

}  // namespace flashgen_device
