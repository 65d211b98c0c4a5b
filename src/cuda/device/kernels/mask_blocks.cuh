// The user mask's cells (params.mask_key_cells, mask_query_cells and
// mask_full_cells, softmax/mask.cuh), which narrow the attention kernels'
// traversals and spare them the evaluation of wholly attended blocks: a CTA
// per cell of kMaskCell queries and per word of 32 key cells (blockIdx.x
// over both, the words fastest), per slot (blockIdx.y the head, blockIdx.z
// the batch entry, where the expression reads them); its 256 threads the
// cell's queries by kMaskCell keys. Cells the diagonals mask wholly are
// not evaluated (and count as wholly attended: they have no pair left).
// Each pair any attention kernel will evaluate is evaluated here first, so
// the faults are found (and the first one recorded) before they run.
#pragma once

#include "common.cuh"
#include "softmax/mask.cuh"

namespace flashgen_device {

template <class C>
struct MaskBlocks {
  static_assert(kMaskCell * kMaskCell == 256, "a thread per pair of a cell of queries and keys");

  static __device__ void run(const AttentionParams& p, unsigned char*) {
    const int query_cells = ceil_div(p.seq_q, kMaskCell), key_cells = ceil_div(p.seq_kv, kMaskCell);
    const int words = mask_full_words(p);
    const int cell = blockIdx.x / words, word = blockIdx.x % words;
    const int head = blockIdx.y, batch = blockIdx.z;
    const int row0 = cell * kMaskCell;
    const int query = row0 + threadIdx.x / kMaskCell, key_lane = threadIdx.x % kMaskCell;
    const int slot = batch * p.mask_head_slots + head;
    const BlockRange seen_cells = diagonal_key_blocks<C, kMaskCell>(p, row0, kMaskCell);
    const int first_cell = 32 * word, end_cell = min_of(first_cell + 32, key_cells);
    int* query_cells_of_keys = p.mask_query_cells + 2 * slot * key_cells;
    int first = key_cells, end = 0;  // of the attended cells
    unsigned full = 0;               // bit c - first_cell: cell c wholly attended
    for (int c = first_cell; c < end_cell; ++c) {
      if (c < seen_cells.first || c >= seen_cells.end) {
        full |= 1u << (c - first_cell);
        continue;
      }
      const int key = c * kMaskCell + key_lane;
      const bool seen = query < p.seq_q && !is_masked<C>(p, query, key);
      const bool attended = seen && user_attends<C>(p, batch, head, query, key);
      const bool any = __syncthreads_or(attended);
      const bool hole = __syncthreads_or(seen && !attended);
      if (threadIdx.x != 0) continue;
      if (!hole) full |= 1u << (c - first_cell);
      if (any) {
        first = min_of(first, c);
        end = c + 1;
        atomicMax(&query_cells_of_keys[2 * c], query_cells - cell);
        atomicMax(&query_cells_of_keys[2 * c + 1], cell + 1);
      }
    }
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
