// The order in which a key/value backward CTA, whose key rows start at key0,
// traverses the query blocks that see them: every block of kBlockN query
// rows of every query head of its key/value head's group, head by head,
// over the blocks that see its keys (scheduler/block_ranges.cuh). (The mma.sync
// and fp32 kernels walk the same order as two nested loops.)
#pragma once

#include "common.cuh"
#include "scheduler/cta_tile.cuh"
#include "scheduler/block_ranges.cuh"

namespace flashgen_device {

// The traversal as a count, as the wgmma kernels' stage pipelines number
// the blocks: the j-th block is the one at query0_of(j) of head head_of(j).
template <int kBlockN>
struct QueryTraversal {
  int first_block, blocks_per_head, total;
  int batch, first_head;  // the CTA's batch row, its group's first query head
  // The walk of the CTA owning `tile` (keys tile.row0 on, of kv head tile.head).
  template <class C>
  static __device__ __forceinline__ QueryTraversal of(const AttentionParams& p,
                                                      const CtaTile& tile, int keys) {
    const BlockRange blocks =
        query_blocks_for_keys<C, kBlockN>(p, tile.row0, keys, tile.batch, tile.head);
    QueryTraversal walk;
    walk.first_block = blocks.first;
    walk.blocks_per_head = blocks.count();
    walk.total = walk.blocks_per_head * p.group_size;
    walk.batch = tile.batch;
    walk.first_head = tile.head * p.group_size;
    return walk;
  }
  __device__ __forceinline__ int head_of(int j) const {
    return first_head + j / blocks_per_head;
  }
  __device__ __forceinline__ int query0_of(int j) const {
    return (first_block + j % blocks_per_head) * kBlockN;
  }
};

}  // namespace flashgen_device
