// Copies by the Tensor Memory Accelerator (sm_90): one instruction moves a
// box of a tensor described by a TensorMap (params.cuh) into shared memory
// and reports its bytes to an mbarrier, whose phase completes once the
// expected bytes have landed (and its arrivals are in).
#pragma once

#include "common.cuh"
#include "params.cuh"
#include "layout/shared_memory.cuh"

namespace flashgen_device {

// Counts this thread's arrival and announces `bytes` more bytes the phase
// waits for (the TMA copies that complete on this barrier).
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(u64* barrier, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   shared_address(barrier)),
               "r"(bytes)
               : "memory");
}

// Announces `bytes` more bytes without an arrival: the copies that follow
// may fly while the caller prepares what its later arrival publishes.
__device__ __forceinline__ void mbarrier_expect_bytes(u64* barrier, u32 bytes) {
  asm volatile(
      "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)),
      "r"(bytes)
      : "memory");
}

// The box of `map` at coordinates (c0 fastest .. c3) into `destination`
// (16-byte aligned; elements past the tensor's ends are zero), completing
// on `barrier`. `map` is a kernel parameter (__grid_constant__).
__device__ __forceinline__ void tma_load_4d(void* destination, const TensorMap* map, int c0,
                                            int c1, int c2, int c3, u64* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(shared_address(destination)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
      "r"(shared_address(barrier))
      : "memory");
}

// The same for a map of three dims (a token-row view: TraversedTensorMaps).
__device__ __forceinline__ void tma_load_3d(void* destination, const TensorMap* map, int c0,
                                            int c1, int c2, u64* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(shared_address(destination)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2),
      "r"(shared_address(barrier))
      : "memory");
}

// The same for a map of five dims (the sliced view: TraversedTensorMaps).
__device__ __forceinline__ void tma_load_5d(void* destination, const TensorMap* map, int c0, int c1,
                                            int c2, int c3, int c4, u64* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::"r"(shared_address(destination)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
      "r"(shared_address(barrier))
      : "memory");
}

// Tiles in the layout TMA writes from boxes of kSliceCols columns (8, or 16
// for a 32-byte swizzle: the map's box): [kCols / kSliceCols][kRows][kSliceCols],
// one slice of all kRows rows after the other.

// Bytes of `slices` such slices of 16-bit elements.
template <int kRows, int kSliceCols = 8>
__device__ __forceinline__ u32 tma_slice_bytes(int slices) {
  return u32(slices) * kRows * kSliceCols * sizeof(u16);
}

// Copies slices [0, slices) of rows [row0, row0 + kRows), columns from col0
// on, of one (head, batch) of `map` into `tile`, completing on `full`.
template <int kRows, int kSliceCols = 8>
__device__ __forceinline__ void tma_load_slices(u16* tile, const TensorMap* map, int slices,
                                                int col0, int row0, int head, int batch,
                                                u64* full) {
  for (int slice = 0; slice < slices; ++slice)
    tma_load_4d(tile + slice * kRows * kSliceCols, map, col0 + slice * kSliceCols, row0, head,
                batch, full);
}

// The same after announcing their bytes on `full` (its one arrival).
template <int kRows, int kSliceCols = 8>
__device__ __forceinline__ void tma_load_announced_slices(u16* tile, const TensorMap* map,
                                                          int slices, int col0, int row0, int head,
                                                          int batch, u64* full) {
  mbarrier_arrive_expect_bytes(full, tma_slice_bytes<kRows, kSliceCols>(slices));
  tma_load_slices<kRows, kSliceCols>(tile, map, slices, col0, row0, head, batch, full);
}

// Slices [0, slices) of rows [row0, row0 + kRows) of a token-row view
// (tensor_maps.hpp), from column col0 of the row, into `tile`, completing on
// `full` (the caller announces their bytes). TMA starts a box only
// at a 16-byte boundary (elsewhere the copy is an illegal instruction): col0
// is a multiple of 8, the boundary at or before the head's first column
// wanted. A copy per slice: token_row_copy's way where no box of the
// sliced view does (past the row's whole slices, or no map encoded).
template <int kRows, int kSliceCols>
__device__ __forceinline__ void tma_load_token_row_slices(u16* tile, const TensorMap* map,
                                                          int slices, int col0, int row0,
                                                          int batch, u64* full) {
  for (int slice = 0; slice < slices; ++slice)
    tma_load_3d(tile + slice * kRows * kSliceCols, map, col0 + slice * kSliceCols, row0, batch,
                full);
}

// How a head's tile of one of the two tensors of `maps` (kSecond: the
// second) is copied on token rows: its `head_slices` slices from column
// col0 (a multiple of kTokenRowAlign, so of a slice) in one box of the
// sliced view whose boxes are that many slices (`box`), where the host
// encoded one and the slices lie within the row's whole slices; else
// (`box` null) a copy per slice (the last heads of a row that is not whole
// slices).
struct TokenRowCopy {
  const TensorMap* box;
  int slices;
};
template <int kSliceCols, bool kSecond>
__device__ __forceinline__ TokenRowCopy token_row_copy(const TraversedTensorMaps& maps, int col0,
                                                       int head_slices) {
  const TensorMap* box = nullptr;
  if (col0 / kSliceCols + head_slices <= maps.row_slices[kSecond]) {
    if (head_slices == maps.box_slices[kSecond])
      box = &maps.sliced[kSecond];
    else if (head_slices == maps.wide_slices[kSecond])
      box = &maps.sliced_wide[kSecond];
  }
  return {box, head_slices};
}

// Issues that copy of rows [row0, row0 + kRows) into `tile`, completing on
// `full` (the caller announces its bytes: copy.slices slices).
template <int kRows, int kSliceCols, bool kSecond>
__device__ __forceinline__ void tma_load_token_row_copy(u16* tile, const TraversedTensorMaps& maps,
                                                        TokenRowCopy copy, int col0, int row0,
                                                        int batch, u64* full) {
  if (copy.box != nullptr)
    tma_load_4d(tile, copy.box, 0, row0, col0 / kSliceCols, batch, full);
  else
    tma_load_token_row_slices<kRows, kSliceCols>(tile, &maps.view[kSecond], copy.slices, col0,
                                                 row0, batch, full);
}

// A head's tile of one tensor of `maps` on token rows (its `head_slices`
// slices from column col0), announced on `full` (its one arrival), then
// copied.
template <int kRows, int kSliceCols, bool kSecond>
__device__ __forceinline__ void tma_load_announced_token_row_tile(u16* tile,
                                                                  const TraversedTensorMaps& maps,
                                                                  int head_slices, int col0,
                                                                  int row0, int batch, u64* full) {
  const TokenRowCopy copy = token_row_copy<kSliceCols, kSecond>(maps, col0, head_slices);
  mbarrier_arrive_expect_bytes(full, tma_slice_bytes<kRows, kSliceCols>(copy.slices));
  tma_load_token_row_copy<kRows, kSliceCols, kSecond>(tile, maps, copy, col0, row0, batch, full);
}

// Both tensors of `maps` (token-row views) for one traversed block, rows
// row0 on: `first_slices` slices of the first from column first_col0 (a
// multiple of kTokenRowAlign) into first_tile, `second_slices` of the second
// from second_col0 into second_tile (token_row_copy: their tiles' slices
// where one box copies them); announces their bytes on `full` (with the
// caller's one arrival if kArrive, else without: the caller arrives later),
// then issues the copies.
template <int kRows, int kSliceCols, bool kArrive = true>
__device__ __forceinline__ void tma_load_token_row_block(u16* first_tile, u16* second_tile,
                                                         const TraversedTensorMaps& maps,
                                                         int row0, int batch, int first_col0,
                                                         int first_slices, int second_col0,
                                                         int second_slices, u64* full) {
  const TokenRowCopy first = token_row_copy<kSliceCols, false>(maps, first_col0, first_slices);
  const TokenRowCopy second = token_row_copy<kSliceCols, true>(maps, second_col0, second_slices);
  const u32 bytes = tma_slice_bytes<kRows, kSliceCols>(first.slices + second.slices);
  if constexpr (kArrive)
    mbarrier_arrive_expect_bytes(full, bytes);
  else
    mbarrier_expect_bytes(full, bytes);
  tma_load_token_row_copy<kRows, kSliceCols, false>(first_tile, maps, first, first_col0, row0,
                                                    batch, full);
  tma_load_token_row_copy<kRows, kSliceCols, true>(second_tile, maps, second, second_col0, row0,
                                                   batch, full);
}

// Token rows: where a head's Dqk and Dv columns start in their tiles, past
// the 32-byte boundaries (kTokenRowAlign elements) TMA copies them from.
// Zero elsewhere.
struct HeadShifts {
  int qk, v;
};
template <class C, bool kTokenRows>
__device__ __forceinline__ HeadShifts head_shifts(int head) {
  if constexpr (!kTokenRows) return {0, 0};
  return {head * C::kDimQK % kTokenRowAlign, head * C::kDimV % kTokenRowAlign};
}

// Slices of kSliceCols columns that hold a head's `cols` columns from
// column `shift` of a tile (0 where its rows are not token rows).
template <int kSliceCols>
__device__ __forceinline__ int slices_holding(int shift, int cols) {
  return ceil_div(shift + cols, kSliceCols);
}

// Offset in elements of element (row, col) of one slice of kSliceCols
// columns as TMA writes it: rows of 8 columns (16 bytes) one after another,
// or of 16 swizzled by 32 bytes, where a row's two 16-byte halves trade
// places in rows 4-7 of every 8 (address bit 4 flipped by bit 7).
template <int kSliceCols>
__device__ __forceinline__ int tma_slice_offset(int row, int col) {
  if constexpr (kSliceCols == 8) return row * 8 + col;
  return row * 16 + ((((col >> 3) ^ (row >> 2)) & 1) << 3) + (col & 7);
}

// The 16-byte chunk of 8 elements with elements [first, end) zeroed, as an
// AND mask.
__device__ __forceinline__ uint4 chunk_zero_mask(int first, int end) {
  u32 words[4];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const bool lo = 2 * w >= first && 2 * w < end, hi = 2 * w + 1 >= first && 2 * w + 1 < end;
    words[w] = (lo ? 0u : 0xffffu) | (hi ? 0u : 0xffff0000u);
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

// Zeroes columns [first_col, end_col) of every row of a slice of kRows rows,
// a 16-byte chunk of a row at a time; `threads` threads from `thread` on
// share the rows.
template <int kRows, int kSliceCols>
__device__ __forceinline__ void zero_slice_columns(u16* slice, int first_col, int end_col,
                                                   int thread, int threads) {
#pragma unroll 1
  for (int c0 = 0; c0 < kSliceCols; c0 += 8) {
    const int first = max_of(first_col - c0, 0), end = min_of(end_col - c0, 8);
    if (first >= end) continue;
    const uint4 keep = chunk_zero_mask(first, end);
    for (int row = thread; row < kRows; row += threads) {
      uint4* chunk = reinterpret_cast<uint4*>(slice + tma_slice_offset<kSliceCols>(row, c0));
      uint4 v = *chunk;
      v.x &= keep.x, v.y &= keep.y, v.z &= keep.z, v.w &= keep.w;
      *chunk = v;
    }
  }
}

// Zeroes the columns of a token-row tile (kRows rows, slices of kSliceCols)
// that belong to other heads: those before `shift` and those from shift +
// `cols` to the end of the last slice the copies wrote. `threads` threads
// from `thread` on share the rows.
template <int kRows, int kSliceCols>
__device__ __forceinline__ void zero_neighbour_columns(u16* tile, int shift, int cols, int thread,
                                                       int threads) {
  for (int slice = 0; slice * kSliceCols < shift; ++slice)
    zero_slice_columns<kRows, kSliceCols>(tile + slice * kRows * kSliceCols, 0,
                                          shift - slice * kSliceCols, thread, threads);
  const int last = (shift + cols - 1) / kSliceCols;
  zero_slice_columns<kRows, kSliceCols>(tile + last * kRows * kSliceCols,
                                        shift + cols - last * kSliceCols, kSliceCols, thread,
                                        threads);
}

// Bytes of a tile of kRows rows and kCols columns as TMA writes it: its
// slices, a partial last one whole (zeros past kCols).
template <int kRows, int kSliceCols, int kCols>
__device__ __forceinline__ u32 tma_tile_bytes() {
  return tma_slice_bytes<kRows, kSliceCols>(ceil_div(kCols, kSliceCols));
}

// All kCols columns (the tensor's own: Dqk or Dv) of rows [row0, row0 +
// kRows) of one (head, batch) into `tile`, completing on `full`: the whole
// slices with one copy of the sliced view (whose box is all of them), a
// last partial slice with one of the per-slice map. A copy per slice costs
// the issuing thread about ten instructions; at 384 columns, 48 of them a
// block of Q and dO kept the key/value kernel's producer behind its
// consumers.
template <int kRows, int kSliceCols, int kCols>
__device__ __forceinline__ void tma_load_tile(u16* tile, const TensorMap* sliced,
                                              const TensorMap* map, int row0, int head, int batch,
                                              u64* full) {
  constexpr int kWhole = kCols / kSliceCols;
  if constexpr (kWhole > 0) tma_load_5d(tile, sliced, 0, row0, 0, head, batch, full);
  if constexpr (kCols % kSliceCols != 0)
    tma_load_4d(tile + kWhole * kRows * kSliceCols, map, kWhole * kSliceCols, row0, head, batch,
                full);
}

// The same after announcing the tile's bytes on `full` (its one arrival).
template <int kRows, int kSliceCols, int kCols>
__device__ __forceinline__ void tma_load_announced_tile(u16* tile, const TensorMap* sliced,
                                                        const TensorMap* map, int row0, int head,
                                                        int batch, u64* full) {
  mbarrier_arrive_expect_bytes(full, tma_tile_bytes<kRows, kSliceCols, kCols>());
  tma_load_tile<kRows, kSliceCols, kCols>(tile, sliced, map, row0, head, batch, full);
}

// A head's tile either way: on 16-byte rows as above (one tensor of `maps`,
// kSecond: the second), on token rows (kTokenRows) the copy of its kCols
// columns from the 32-byte boundary `shift` columns before its first
// (tma_load_announced_token_row_tile).
template <int kRows, int kSliceCols, int kCols, bool kTokenRows, bool kSecond>
__device__ __forceinline__ void tma_load_announced_head_tile(u16* tile,
                                                             const TraversedTensorMaps& maps,
                                                             int row0, int head, int batch,
                                                             int shift, u64* full) {
  if constexpr (kTokenRows)
    tma_load_announced_token_row_tile<kRows, kSliceCols, kSecond>(
        tile, maps, slices_holding<kSliceCols>(shift, kCols), head * kCols - shift, row0, batch,
        full);
  else
    tma_load_announced_tile<kRows, kSliceCols, kCols>(
        tile, &maps.sliced[kSecond], &maps.view[kSecond], row0, head, batch, full);
}

// One traversed block of both tensors of `maps` (rows row0 on, of one head
// and batch; all kFirstCols and kSecondCols columns) into its stage's
// tiles: announces the bytes of both on `full` (with the caller's one
// arrival if kArrive, else without: the caller arrives later), then issues
// their copies.
template <int kRows, int kSliceCols, int kFirstCols, int kSecondCols, bool kArrive = true>
__device__ __forceinline__ void tma_load_traversed_block(u16* first_tile, u16* second_tile,
                                                         const TraversedTensorMaps& maps, int row0,
                                                         int head, int batch, u64* full) {
  const u32 bytes = tma_tile_bytes<kRows, kSliceCols, kFirstCols>() +
                    tma_tile_bytes<kRows, kSliceCols, kSecondCols>();
  if constexpr (kArrive)
    mbarrier_arrive_expect_bytes(full, bytes);
  else
    mbarrier_expect_bytes(full, bytes);
  tma_load_tile<kRows, kSliceCols, kFirstCols>(first_tile, &maps.sliced[0], &maps.view[0], row0,
                                               head, batch, full);
  tma_load_tile<kRows, kSliceCols, kSecondCols>(second_tile, &maps.sliced[1], &maps.view[1],
                                                row0, head, batch, full);
}

// Zeroes rows [first_row, kRows) of every slice of a tile of kCols columns
// in the layout TMA writes, 16 bytes at a time (a row's bytes stay within
// the row under the 32-byte swizzle); `threads` threads from `thread` on
// share the work.
template <int kRows, int kCols, int kSliceCols>
__device__ __forceinline__ void zero_rows_from(u16* tile, int first_row, int thread,
                                               int threads) {
  static_assert(kCols % kSliceCols == 0 && kSliceCols % 8 == 0, "whole slices of 16 bytes");
  const int chunks = (kRows - first_row) * (kSliceCols / 8);  // of one slice
  for (int i = thread; i < kCols / kSliceCols * chunks; i += threads) {
    u16* rows = tile + (i / chunks * kRows + first_row) * kSliceCols;
    reinterpret_cast<uint4*>(rows)[i % chunks] = make_uint4(0, 0, 0, 0);
  }
}

// Zeroes columns [first_col, kCols) of every stage (first_col a multiple
// of the slices' width): the columns past a tensor's last slice up to the
// tile's width, which TMA never writes. `threads` threads from `thread` on
// share the work.
template <int kRows, int kCols, int kStages>
__device__ __forceinline__ void zero_columns_from(u16 (&tiles)[kStages][kRows * kCols],
                                                  int first_col, int thread, int threads) {
  for (int stage = 0; stage < kStages; ++stage)
    for (int i = first_col * kRows + thread; i < kRows * kCols; i += threads) tiles[stage][i] = 0;
}

// The same for both tiles a TMA producer fills (K and V; Q and dO): the
// first's columns from `first_cols` on, the second's from `second_cols`.
template <int kRows, int kFirstCols, int kSecondCols, int kStages>
__device__ __forceinline__ void zero_unwritten_columns(u16 (&first)[kStages][kRows * kFirstCols],
                                                       int first_cols,
                                                       u16 (&second)[kStages][kRows * kSecondCols],
                                                       int second_cols, int thread, int threads) {
  zero_columns_from<kRows, kFirstCols>(first, first_cols, thread, threads);
  zero_columns_from<kRows, kSecondCols>(second, second_cols, thread, threads);
}

}  // namespace flashgen_device
