// Hopper warpgroup MMA (sm_90a): shared-memory operand layout, descriptors,
// fences, and the global -> shared copy into that layout.
//
// Tiles live in shared memory in the "no swizzle" canonical layout: 8x8 core
// matrices of 16-bit elements, each 8 rows of 16 contiguous bytes (128 bytes),
// stored one after another along the row's 16-byte chunks, then by groups of
// 8 rows. Element (r, c) of a [rows][cols] tile is at
//   ((r / 8) * (cols / 8) + c / 8) * 64 + (r % 8) * 8 + c % 8.
// Read as an operand whose K runs along c (Q, K: "K-major"), adjacent core
// matrices in K are 128 bytes apart and in M/N cols * 16 bytes. Read with K
// along r (V in O = P·V: "MN-major"), adjacent core matrices in K are
// cols * 16 bytes apart and in N 128 bytes. A 16-byte chunk of a global row
// lands whole in one core-matrix row, so cp.async fills the layout directly
// (16-byte copies for 16-byte aligned rows, 8- or 4-byte ones for rows that
// are only 8- or 4-byte aligned).
#pragma once

#include "common.cuh"
#include "copy/tile_copy.cuh"
#include "arch/wgmma_ops.cuh"

namespace flashgen_device {

// Descriptor of a no-swizzle operand at `tile`: `k_stride` and `mn_stride`
// are the byte distances between adjacent core matrices along K and M/N.
__device__ __forceinline__ u64 matrix_descriptor(const u16* tile, u32 k_stride, u32 mn_stride) {
  const u64 address = (shared_address(tile) & 0x3FFFF) >> 4;
  return address | (u64((k_stride >> 4) & 0x3FFF) << 16) | (u64((mn_stride >> 4) & 0x3FFF) << 32);
}

// The same for a tile in the 32-byte-swizzled layout TMA writes with
// CU_TENSOR_MAP_SWIZZLE_32B from boxes of 16 columns: panels of 16 columns
// ([cols / 16][rows][16]), each row 32 bytes, the 16-byte halves of rows
// 4..7 of every 8 swapped (address bit 4 ^= bit 7; the panels 256-byte
// aligned). `leading` and `stride` are the byte distances between atoms
// (8 rows x 32 bytes) along the leading dimension and along the 8-row
// groups.
__device__ __forceinline__ u64 swizzled32_descriptor(const u16* tile, u32 leading, u32 stride) {
  return matrix_descriptor(tile, leading, stride) | (u64(3) << 62);
}

// A traversed [kRows][kCols] tile (K or V over keys, Q or dO over queries)
// as the B operand of a wgmma, in the layout its copies wrote:
//  - cp.async: the row-group-major core-matrix layout above;
//  - TMA (kTma), no swizzle: 8-column slices of all kRows rows one after the
//    other ([kCols / 8][kRows][8]: core matrices 128 bytes apart along the
//    rows, kRows·16 along the columns);
//  - TMA, kSwizzle = 32: 16-column panels swizzled by 32 bytes
//    ([kCols / 16][kRows][16]: swizzled32_descriptor), whose 8-row atoms are
//    256 bytes apart along the rows and kRows·32 along the columns.
// Steps are in descriptor units (16 bytes).
template <int kRows, int kCols, bool kTma, int kSwizzle>
struct TraversedTile {
  static_assert(kSwizzle == 0 || (kSwizzle == 32 && kTma), "swizzled tiles come from TMA");
  static constexpr bool kSwizzled = kSwizzle == 32;

  // K-major: the tile's rows are n, its columns k (X·tileᵀ: S = Q·Kᵀ).
  // A k step of 16 columns is 2 core matrices (cp.async), 2 slices or 1
  // panel (TMA); the swizzled atom spans it, so no leading offset is read.
  static __device__ __forceinline__ u64 k_major(const u16* tile) {
    return kSwizzled ? swizzled32_descriptor(tile, 16, 256)
           : kTma    ? matrix_descriptor(tile, kRows * 16, 128)
                     : matrix_descriptor(tile, 128, kCols * 16);
  }
  static constexpr int kKMajorStep = kTma ? 2 * kRows : 16;

  // MN-major: the columns are n, the rows k (X·tile: O += P·V). 16 rows are
  // 2 core matrices along k: kCols·16 bytes apart (cp.async), 128 (TMA) or
  // 256 (swizzled; one atom, 512 bytes for the step).
  static __device__ __forceinline__ u64 mn_major(const u16* tile) {
    return kSwizzled ? swizzled32_descriptor(tile, kRows * 32, 256)
           : kTma    ? matrix_descriptor(tile, 128, kRows * 16)
                     : matrix_descriptor(tile, kCols * 16, 128);
  }
  static constexpr int kMnMajorStep = kSwizzled ? 32 : kTma ? 16 : 2 * kCols;

  // The tile from column n0 on (a multiple of 16): TMA's slices and panels
  // hold all rows of their columns, kRows apart per column; the core-matrix
  // layout 8 columns of a row block per 64 elements.
  static __device__ __forceinline__ const u16* from_column(const u16* tile, int n0) {
    return tile + (kTma ? n0 * kRows : n0 * 8);
  }
};

// Orders this warpgroup's register and shared-memory accesses before the
// wgmma operations that follow (needed when accumulators or A registers were
// written by ordinary instructions).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Shared memory written through the generic proxy (cp.async, st.shared)
// becomes visible to the tensor cores' async proxy.
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// A warp's accumulators [1][n-tiles][4] (the m16n8k16 C layout per 8 columns,
// which is also wgmma's) as the flat register list a wgmma instruction names.
template <int kTiles>
__device__ __forceinline__ float (&flat(float (&a)[1][kTiles][4]))[kTiles * 4] {
  return *reinterpret_cast<float(*)[kTiles * 4]>(&a[0][0][0]);
}

// kCount registers of a flat accumulator list from the kFirst-th on (the
// part of a wide tile one wgmma instruction names).
template <int kFirst, int kCount, int kAll>
__device__ __forceinline__ float (&registers_from(float (&a)[kAll]))[kCount] {
  static_assert(kFirst + kCount <= kAll, "within the list");
  return *reinterpret_cast<float(*)[kCount]>(&a[kFirst]);
}

// Keeps the compiler from moving reads or writes of an accumulator register
// across the point where it is placed (wgmma writes them asynchronously).
template <int kCount>
__device__ __forceinline__ void fence_registers(float (&r)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Copies rows [0, kRows) x columns [0, kCols) of a global tile whose rows and
// pointer are 2·kVec-byte aligned (alignment class kVec = 8, 4 or 2) into a
// core-matrix tile: each 16-byte chunk of a row by one cp.async of 16 bytes,
// or by 16 / (2·kVec) smaller ones. Rows at or past `valid_rows` and columns
// at or past `valid_cols` are zero-filled. Eight consecutive threads fill one
// 128-byte core matrix, so the shared-memory writes of a warp are contiguous.
template <int kRows, int kCols, int kVec, int kThreads>
__device__ __forceinline__ void copy_core_matrix_tile(u16* tile, const u16* global,
                                                      index_t row_stride, int valid_rows,
                                                      int valid_cols, int thread) {
  static_assert(kRows % 8 == 0 && kCols % 8 == 0, "core matrices are 8 x 8");
  static_assert(kVec == 8 || kVec == 4 || kVec == 2, "cp.async copies 4, 8 or 16 bytes");
  constexpr int kChunks = kRows * (kCols / 8);  // 16-byte chunks of the tile
  // A rolled loop: unrolled, the compiler keeps every pass's address live
  // through the MMAs, registers the accumulators need.
#pragma unroll 1
  for (int pass = 0; pass < ceil_div(kChunks, kThreads); ++pass) {
    const int i = pass * kThreads + thread;
    if (kChunks % kThreads != 0 && i >= kChunks) break;
    const int row = (i / kCols) * 8 + (i & 7);  // i / (8 * (kCols / 8)) row groups
    const int col = ((i >> 3) % (kCols / 8)) * 8;
#pragma unroll
    for (int part = 0; part < 8 / kVec; ++part) {
      const int first = col + part * kVec;
      const int bytes = row < valid_rows ? 2 * max_of(0, min_of(kVec, valid_cols - first)) : 0;
      const u16* source = bytes > 0 ? global + row * row_stride + first : global;
      cp_async_zfill<2 * kVec>(tile + i * 8 + part * kVec, source, bytes);
    }
  }
}

// A head's rows into a core-matrix tile: by copy_core_matrix_tile (issued
// only), or into a token-row tile (kTokenRows: rows of any alignment) by
// load_tile_shifted, each row's first element at column `shift`.
template <int kRows, int kCols, int kVec, int kThreads, bool kTokenRows>
__device__ __forceinline__ void copy_head_rows(u16* tile, const u16* global, index_t row_stride,
                                               int valid_rows, int valid_cols, int shift,
                                               int thread) {
  if constexpr (kTokenRows)
    load_tile_shifted<kRows, kCols, kThreads>(tile, global, row_stride, valid_rows, valid_cols,
                                              shift, thread);
  else
    copy_core_matrix_tile<kRows, kCols, kVec, kThreads>(tile, global, row_stride, valid_rows,
                                                        valid_cols, thread);
}

}  // namespace flashgen_device
