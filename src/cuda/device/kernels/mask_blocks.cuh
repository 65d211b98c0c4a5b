// The user mask's ranges of attended cells (params.mask_key_cells and
// mask_query_cells, softmax/mask.cuh), which narrow the attention kernels'
// traversals: a CTA per cell of kMaskCell queries and per slot (blockIdx.y
// the head, blockIdx.z the batch entry, where the expression reads them),
// its 256 threads the cell's queries by kMaskCell keys, over the key cells
// the diagonals leave; and each query cell's longest run of key cells the
// mask attends wholly (params.mask_full_key_cells). Each pair is evaluated
// here first, so the faults are found (and the first one recorded) before
// any attention kernel runs.
#pragma once

#include "common.cuh"
#include "softmax/mask.cuh"

namespace flashgen_device {

template <class C>
struct MaskBlocks {
  static_assert(kMaskCell * kMaskCell == 256, "a thread per pair of a cell of queries and keys");

  static __device__ void run(const AttentionParams& p, unsigned char*) {
    const int cell = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int row0 = cell * kMaskCell;
    const int query = row0 + threadIdx.x / kMaskCell, key_lane = threadIdx.x % kMaskCell;
    const int query_cells = ceil_div(p.seq_q, kMaskCell), key_cells = ceil_div(p.seq_kv, kMaskCell);
    const int slot = batch * p.mask_head_slots + head;
    int* query_cells_of_keys = p.mask_query_cells + 2 * slot * key_cells;
    const BlockRange keys = diagonal_key_blocks<C, kMaskCell>(p, row0, kMaskCell);
    int first = key_cells, end = 0;      // of the attended cells
    int run = -1, full = 0, full_end = 0;  // the current and the longest full run
    for (int c = keys.first; c < keys.end; ++c) {
      const int key = c * kMaskCell + key_lane;
      const bool seen = query < p.seq_q && !is_masked<C>(p, query, key);
      const bool attended = seen && user_attends<C>(p, batch, head, query, key);
      const bool any = __syncthreads_or(attended);
      const bool hole = __syncthreads_or(seen && !attended);
      if (threadIdx.x != 0) continue;
      if (any) {
        first = min_of(first, c);
        end = c + 1;
        atomicMax(&query_cells_of_keys[2 * c], query_cells - cell);
        atomicMax(&query_cells_of_keys[2 * c + 1], cell + 1);
      }
      if (hole) {
        run = -1;
      } else {
        if (run < 0) run = c;
        if (c + 1 - run > full_end - full) {
          full = run;
          full_end = c + 1;
        }
      }
    }
    if (threadIdx.x == 0) {
      // The cells the diagonals mask wholly have no pair to evaluate: a run
      // that reaches the first or the last cell traversed goes on to the
      // sequence's ends, so the blocks that cross a diagonal skip the mask.
      if (full_end > full && full == keys.first) full = 0;
      if (full_end > full && full_end == keys.end) full_end = key_cells;
      const int at = 2 * (slot * query_cells + cell);
      p.mask_key_cells[at] = key_cells - first;
      p.mask_key_cells[at + 1] = end;
      p.mask_full_key_cells[at] = full;
      p.mask_full_key_cells[at + 1] = full_end;
    }
  }
};

}  // namespace flashgen_device
