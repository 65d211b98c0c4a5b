// The user mask's cells (params.mask_key_cells, mask_query_cells and
// mask_full_cells, softmax/mask.cuh), which narrow the attention kernels'
// traversals and spare them the evaluation of wholly attended blocks: a CTA
// per cell of kMaskCell queries and per word of 32 key cells (blockIdx.x
// over both, the words fastest), per slot (blockIdx.y the head, blockIdx.z
// the batch entry, where the expression reads them). Each warp takes every
// eighth cell of the word (of 256 threads), a lane a key of it and every
// other query, and votes; the CTA gathers the cells' verdicts in shared
// memory. Cells the diagonals mask wholly are not evaluated (and count as
// wholly attended: they have no pair left). Each pair any attention kernel
// will evaluate is evaluated here first, so the faults are found (and the
// first one recorded) before they run.
#pragma once

#include "common.cuh"
#include "softmax/mask.cuh"

namespace flashgen_device {

template <class C>
struct MaskBlocks {
  static_assert(2 * kMaskCell == 32, "a warp holds two queries of a cell by its keys");

  static __device__ void run(const AttentionParams& p, unsigned char*) {
    __shared__ unsigned full;  // bit c - first_cell: cell c wholly attended
    __shared__ int first, end;  // of the attended cells
    const int query_cells = ceil_div(p.seq_q, kMaskCell), key_cells = ceil_div(p.seq_kv, kMaskCell);
    const int words = mask_full_words(p);
    const int cell = blockIdx.x / words, word = blockIdx.x % words;
    const int head = blockIdx.y, batch = blockIdx.z;
    const int row0 = cell * kMaskCell;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    const int slot = batch * p.mask_head_slots + head;
    const BlockRange seen_cells = diagonal_key_blocks<C, kMaskCell>(p, row0, kMaskCell);
    const int first_cell = 32 * word, end_cell = min_of(first_cell + 32, key_cells);
    int* query_cells_of_keys = p.mask_query_cells + 2 * slot * key_cells;
    if (threadIdx.x == 0) {
      full = 0;
      first = key_cells;
      end = 0;
    }
    __syncthreads();
    for (int c = first_cell + warp; c < end_cell; c += warps) {
      if (c < seen_cells.first || c >= seen_cells.end) {
        if (lane == 0) atomicOr(&full, 1u << (c - first_cell));
        continue;
      }
      const int key = c * kMaskCell + lane % kMaskCell;
      bool any = false, hole = false;
      for (int q = lane / kMaskCell; q < kMaskCell; q += 2) {
        const int query = row0 + q;
        const bool seen = query < p.seq_q && !is_masked<C>(p, query, key);
        const bool attended = seen && user_attends<C>(p, batch, head, query, key);
        any = any || attended;
        hole = hole || (seen && !attended);
      }
      any = __any_sync(0xffffffffu, any);
      hole = __any_sync(0xffffffffu, hole);
      if (lane != 0) continue;
      if (!hole) atomicOr(&full, 1u << (c - first_cell));
      if (any) {
        atomicMin(&first, c);
        atomicMax(&end, c + 1);
        atomicMax(&query_cells_of_keys[2 * c], query_cells - cell);
        atomicMax(&query_cells_of_keys[2 * c + 1], cell + 1);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const int at = slot * query_cells + cell;
      p.mask_full_cells[at * words + word] = full;
      if (end > 0) {
        atomicMax(&p.mask_key_cells[2 * at], key_cells - first);
        atomicMax(&p.mask_key_cells[2 * at + 1], end);
      }
    }
  }
};

}  // namespace flashgen_device
