// Global -> shared tile copies for every alignment class, with zero fill.
//
// The user's rows are read where they are: a bf16 row of 127 elements is only
// 2-byte aligned, so the copy width (kVec elements) comes from the spec's
// alignment class: 8 (16-byte cp.async), 4 (8-byte), 2 (4-byte) or 1 (scalar
// loads, which also serve a dim stride other than 1). Rows past the sequence
// end and columns past the head dimension are zero-filled in shared memory,
// never by padding the tensor in global memory.
#pragma once

#include "common.cuh"

namespace flashgen_device {

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

// Copies `valid_bytes` (0 .. kBytes) from global and zero-fills the rest of kBytes.
template <int kBytes>
__device__ __forceinline__ void cp_async_zfill(void* shared, const void* global, int valid_bytes) {
  const u32 dst = shared_address(shared);
  if (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(global),
                 "r"(valid_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst), "l"(global),
                 "n"(kBytes), "r"(valid_bytes));
  }
}

// Copies a [kRows][kCols] tile starting at `global` (row stride and column
// stride in elements) into shared memory laid out [kRows][kSharedStride].
// Elements at rows >= valid_rows or columns >= valid_cols become zero.
template <int kRows, int kCols, int kSharedStride, int kVec, int kThreads>
__device__ __forceinline__ void load_tile(u16* shared, const u16* global, index_t row_stride,
                                          index_t col_stride, int valid_rows, int valid_cols,
                                          int thread) {
  static_assert(kCols % 8 == 0, "tiles are padded to whole 16-byte chunks");
  constexpr int kChunksPerRow = kCols / kVec;
  constexpr int kChunks = kRows * kChunksPerRow;
  if (kVec > 1) {
#pragma unroll 4
    for (int chunk = thread; chunk < kChunks; chunk += kThreads) {
      const int row = chunk / kChunksPerRow;
      const int col = (chunk % kChunksPerRow) * kVec;
      int valid = row < valid_rows ? min_of(kVec, valid_cols - col) : 0;
      valid = max_of(valid, 0);
      // A chunk with nothing to read still issues a copy of 0 bytes (zero fill)
      // from a harmless address.
      const u16* src = valid > 0 ? global + row * row_stride + col : global;
      cp_async_zfill<kVec * 2>(shared + row * kSharedStride + col, src, valid * 2);
    }
  } else {
#pragma unroll 4
    for (int e = thread; e < kChunks; e += kThreads) {
      const int row = e / kCols;
      const int col = e % kCols;
      u16 value = 0;
      if (row < valid_rows && col < valid_cols) value = global[row * row_stride + col * col_stride];
      shared[row * kSharedStride + col] = value;
    }
  }
}

}  // namespace flashgen_device

namespace flashgen_device {

// Writes a warp's fp32 accumulator tile [kRowTiles][kNTiles][4] (C layout)
// to a strided global matrix in the element type, times `scale`: rows
// row0 + 16·rt + {g, g+8} (first `valid_rows` only), columns col0 + 8·nt +
// 2t + {0, 1} (first `valid_cols` only). With kVec >= 2 the rows are 4-byte
// aligned and the dim stride is 1, so pairs go out as one 32-bit store.
template <int E, int kVec, int kRowTiles, int kNTiles>
__device__ __forceinline__ void store_acc_tile(u16* global, index_t row_stride, index_t col_stride,
                                               const float (&acc)[kRowTiles][kNTiles][4],
                                               const float (&row_scale)[kRowTiles][2],
                                               int valid_rows, int valid_cols, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = rt * 16 + g + 8 * h;
      if (row >= valid_rows) continue;
      u16* out = global + row * row_stride;
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        const int col = nt * 8 + 2 * t;
        const float x0 = acc[rt][nt][2 * h] * row_scale[rt][h];
        const float x1 = acc[rt][nt][2 * h + 1] * row_scale[rt][h];
        if (kVec >= 2 && col + 1 < valid_cols) {
          *reinterpret_cast<u32*>(out + col) = pack2<E>(x0, x1);
        } else {
          if (col < valid_cols) out[col * col_stride] = from_float<E>(x0);
          if (col + 1 < valid_cols) out[(col + 1) * col_stride] = from_float<E>(x1);
        }
      }
    }
  }
}

}  // namespace flashgen_device
