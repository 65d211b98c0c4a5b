// The user mask's cells (params.mask_key_cells, mask_query_cells and
// mask_full_cells, softmax/mask.cuh), which narrow the attention kernels'
// traversals and spare them the evaluation of wholly attended blocks: a
// warp per cell of kMaskCell queries, word of 32 key cells (the warps of a
// CTA consecutive words) and slot (blockIdx.y the head, blockIdx.z the batch
// entry, where the expression reads them). Lane l evaluates key l % 16 of
// each cell with every other query, and the warp votes. Cells the diagonals
// mask wholly are not evaluated (and count as wholly attended: they have no
// pair left). Each pair any attention kernel will evaluate is evaluated here
// first, so the faults are found (and the first one recorded) before they
// run; where none can fault, what the mask reads of a query alone is read
// once per lane and of a key alone once per cell (the sides,
// softmax/user_mask.cuh). A packed sequence or a KV-cache entry (a slot per
// batch entry then) is evaluated over its own lengths and diagonals.
#pragma once

#include "common.cuh"
#include "copy/cache_rows.cuh"
#include "scheduler/sequences.cuh"
#include "softmax/mask.cuh"

namespace flashgen_device {

template <class C>
struct MaskBlocks {
  static_assert(2 * kMaskCell == 32, "a warp holds two queries of a cell by its keys");
  static constexpr int kQueriesPerLane = kMaskCell / 2;

  // Batch entry `batch`'s parameters: a packed sequence's or a KV-cache
  // entry's lengths and diagonals, else the problem's.
  static __device__ __forceinline__ AttentionParams entry_params(const AttentionParams& p,
                                                                 int batch) {
    if (p.q_begin != nullptr) return packed_sequence_params<2>(p, batch);  // no tensor is read
    if (p.cache_seqlens != nullptr) return sequence_params(p, batch);
    return p;
  }

  static __device__ void run(const AttentionParams& problem, unsigned char*) {
    const int head = blockIdx.y, batch = blockIdx.z;
    const AttentionParams p = entry_params(problem, batch);
    // The slot's cells are laid out for the grid's extents.
    const int query_cells = mask_query_cells(p), key_cells = mask_key_cells(p);
    const int words = mask_full_words(p);
    const int lane = threadIdx.x % 32;
    const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (warp >= query_cells * words) return;
    const int cell = warp / words, word = warp % words;
    const int slot = batch * p.mask_head_slots + head;
    const int row0 = cell * kMaskCell;
    const BlockRange seen_cells = diagonal_key_blocks<C, kMaskCell>(p, row0, kMaskCell);
    const int first_cell = max_of(32 * word, seen_cells.first);
    const int end_cell = min_of(32 * word + 32, seen_cells.end);
    // Lane l: key l % 16 of each cell, queries l / 16, l / 16 + 2, ...
    typename C::Mask::QuerySide query_sides[kQueriesPerLane];
    const bool recording = p.mask_fault != nullptr;
    if (!recording)
#pragma unroll
      for (int i = 0; i < kQueriesPerLane; ++i)
        query_sides[i] = user_query_side<C>(p, batch, head, row0 + lane / kMaskCell + 2 * i);
    int* query_cells_of_keys = p.mask_query_cells + 2 * slot * key_cells;
    int first = key_cells, end = 0;  // of the attended cells
    // Bit c - 32·word: cell c wholly attended (those the diagonals mask
    // wholly have no pair left).
    unsigned full = ~0u;
    for (int c = first_cell; c < end_cell; ++c) {
      const int key = c * kMaskCell + lane % kMaskCell;
      bool any = false, hole = false;
      // attended(i, query): whether the lane's i-th query attends its key.
      auto vote = [&](auto attended) {
        for (int i = 0; i < kQueriesPerLane; ++i) {
          const int query = row0 + lane / kMaskCell + 2 * i;
          const bool seen = query < p.seq_q && !is_masked<C>(p, query, key);
          const bool yes = seen && attended(i, query);
          any = any || yes;
          hole = hole || (seen && !yes);
        }
      };
      if (recording) {  // each pair whole, its faults recorded
        vote([&](int, int query) { return user_attends<C>(p, batch, head, query, key); });
      } else {
        const typename C::Mask::KeySide key_side = user_key_side<C>(p, batch, head, key);
        vote([&](int i, int query) {
          return user_attends_sides<C>(p, batch, head, query, key, query_sides[i], key_side);
        });
      }
      if (__any_sync(0xffffffffu, hole)) full &= ~(1u << (c - 32 * word));
      if (__any_sync(0xffffffffu, any)) {
        first = min_of(first, c);
        end = c + 1;
        if (lane == 0) {
          atomicMax(&query_cells_of_keys[2 * c], query_cells - cell);
          atomicMax(&query_cells_of_keys[2 * c + 1], cell + 1);
        }
      }
    }
    if (lane != 0) return;
    const int at = slot * query_cells + cell;
    p.mask_full_cells[at * words + word] = full;
    if (end > 0) {
      atomicMax(&p.mask_key_cells[2 * at], key_cells - first);
      atomicMax(&p.mask_key_cells[2 * at + 1], end);
    }
  }
};

}  // namespace flashgen_device
