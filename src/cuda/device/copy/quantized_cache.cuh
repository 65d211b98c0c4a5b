// The tiles of an fp8 (e4m3) KV cache (kFp8Cache), as the split-key forward
// reads them. issue copies each cached row's bytes, as the aligned 16-byte
// chunks around them, by cp.async into a staging area, and notes where the
// row starts in its first chunk; finish writes the tile's elements as f16,
// each the e4m3 value itself (exact; one conversion a pair): the kernel
// computes over an fp8 cache in f16 and applies the scale
// (KVCacheForwardArgs::k_scale) to its scores and outputs. Appended rows
// (16-bit, of type E, in k_new / v_new; a few a call) are read by finish
// where they are and attended as the cache stores them: x / scale rounded
// to e4m3. Rows past
// valid_rows, rows of a page the block table does not name and columns past
// valid_cols are zeros. A dim stride other than 1 (kStrided) is read element
// by element in finish.
//
// Use as TileCopy's staged path: issue → cp_async_wait + __syncthreads →
// finish → __syncthreads → read.
#pragma once

#include "common.cuh"
#include "copy/cache_rows.cuh"
#include "copy/global_loads.cuh"

namespace flashgen_device {

template <int kRows, int kCols, int kSharedStride, int kThreads, int E, bool kStrided>
struct QuantizedCacheCopy {
  static constexpr bool kStaged = true;
  // A row's bytes span at most kCols / 16 + 1 aligned chunks; after the rows,
  // a byte per row: where it starts in its first chunk, or kNoRow.
  static constexpr int kStageChunks = kCols / 16 + 1;
  static constexpr int kStageBytes = kStageChunks * 16;
  static constexpr int kStageElements = (kRows * kStageBytes + kRows) / 2;  // in 16-bit units
  static constexpr u8 kNoRow = 0xff;
  // Threads side by side on one row's chunks (coalesced reads, and one page
  // lookup per thread and row).
  static constexpr int lanes_for(int chunks) {
    int lanes = 1;
    while (lanes < chunks && lanes < 32) lanes *= 2;
    return lanes;
  }
  static constexpr int kLanesPerRow = lanes_for(kCols / 16);
  static_assert(kThreads % kLanesPerRow == 0 && kRows % 2 == 0 && kCols % 8 == 0,
                "rows are shared among whole groups of lanes");

  template <class Rows>
  static __device__ __forceinline__ void issue(u16*, u16* staging, const Rows& rows, index_t,
                                               int valid_rows, int valid_cols, int thread) {
    if constexpr (kStrided) return;
    u8* stage = reinterpret_cast<u8*>(staging);
    u8* starts = stage + kRows * kStageBytes;
    const int lane = thread % kLanesPerRow;
#pragma unroll 1
    for (int row = thread / kLanesPerRow; row < kRows; row += kThreads / kLanesPerRow) {
      const int key = rows.first + row;
      const u8* source =
          row < valid_rows && key < rows.cached && valid_cols > 0 ? rows.cache_row(key) : nullptr;
      if (lane == 0)
        starts[row] = source == nullptr ? kNoRow : static_cast<u8>(reinterpret_cast<u64>(source) & 15);
      if (source == nullptr) continue;
      const u64 address = reinterpret_cast<u64>(source);
      const u64 end = address + static_cast<u64>(valid_cols);  // the row's end
      const u64 tile_end = address + static_cast<u64>(min_of(valid_cols, kCols));
#pragma unroll 1
      for (int c = lane; c < kStageChunks; c += kLanesPerRow) {
        const u64 first = (address & ~u64(15)) + 16 * c;
        if (first >= tile_end) break;
        u8* to = stage + row * kStageBytes + c * 16;
        if (first + 16 <= end) {
          cp_async_zfill<16>(to, reinterpret_cast<const void*>(first), 16);
        } else {
          // The row's last chunk: a cp.async would read its whole window,
          // past the row (and maybe the cache).
#pragma unroll 1
          for (int i = 0; i < 16; ++i) {
            const long long e = static_cast<long long>(first + i - address);
            to[i] = e >= 0 && e < valid_cols ? source[e] : u8(0);
          }
        }
      }
    }
  }

  template <class Rows>
  static __device__ __forceinline__ void finish(u16* shared, const u16* staging, const Rows& rows,
                                                int valid_rows, int valid_cols, int thread) {
    constexpr int kChunksPerRow = kCols / 8;  // 8 elements each
    const u8* stage = reinterpret_cast<const u8*>(staging);
    const u8* starts = stage + kRows * kStageBytes;
#pragma unroll 2
    for (int chunk = thread; chunk < kRows * kChunksPerRow; chunk += kThreads) {
      const int row = chunk / kChunksPerRow, col = (chunk % kChunksPerRow) * 8;
      const int key = rows.first + row;
      u64 bytes = 0;  // the chunk's 8 e4m3 values, the first lowest
      if (row < valid_rows && col < valid_cols) {
        const int valid = min_of(8, valid_cols - col);
        if (key >= rows.cached)
          bytes = appended_bytes(rows, key - rows.cached, col, valid);
        else if (kStrided)
          bytes = strided_bytes(rows, key, col, valid);
        else if (starts[row] != kNoRow)
          bytes = staged_bytes(stage + row * kStageBytes, starts[row] + col);
        if (valid < 8) bytes &= (u64(1) << (8 * valid)) - 1;  // e4m3 0 is +0
      }
      const u32 lo = static_cast<u32>(bytes), hi = static_cast<u32>(bytes >> 32);
      *reinterpret_cast<uint4*>(shared + row * kSharedStride + col) =
          make_uint4(e4m3_pair_to_f16(lo & 0xffff), e4m3_pair_to_f16(lo >> 16),
                     e4m3_pair_to_f16(hi & 0xffff), e4m3_pair_to_f16(hi >> 16));
    }
  }

 private:
  // 8 bytes of a staged row from byte `offset` on (any alignment: the two
  // aligned words around them; the stage row holds both).
  static __device__ __forceinline__ u64 staged_bytes(const u8* stage_row, int offset) {
    const u64* words = reinterpret_cast<const u64*>(stage_row + (offset & ~7));
    const int shift = 8 * (offset & 7);
    return shift == 0 ? words[0] : (words[0] >> shift) | (words[1] << (64 - shift));
  }

  // The `valid` columns from col on of a cached row whose elements are
  // col_stride apart.
  template <class Rows>
  static __device__ __forceinline__ u64 strided_bytes(const Rows& rows, int key, int col,
                                                      int valid) {
    const u8* source = rows.cache_row(key);
    u64 bytes = 0;
    if (source == nullptr) return bytes;
#pragma unroll 1
    for (int e = 0; e < valid; ++e) bytes |= u64(source[(col + e) * rows.col_stride]) << (8 * e);
    return bytes;
  }

  // The `valid` columns from col on of appended row i as the cache stores
  // them (append_head_rows): x / scale rounded to e4m3.
  template <class Rows>
  static __device__ __forceinline__ u64 appended_bytes(const Rows& rows, int i, int col,
                                                       int valid) {
    const u16* source = rows.appended + i * rows.appended_stride;
    u64 bytes = 0;
#pragma unroll 1
    for (int e = 0; e < valid; ++e)
      bytes |= u64(stored_as_e4m3<E>(source[(col + e) * rows.col_stride], rows.scale)) << (8 * e);
    return bytes;
  }
};

// The copies of an fp8 cache's rows for the kernels that convert them on
// their way into the fragments (arch/warp_gemm_e4m3.cuh): each cached row's
// bytes by cp.async into its staging row as they are (the staging of
// QuantizedCacheCopy, each row from byte 0), in chunks of 16 or 8 bytes as
// the row's address allows (rows 8-byte aligned, kCols a multiple of 16,
// columns past valid_cols, a multiple of 16, zero). Rows past valid_rows and
// rows of a page the block table does not name are zeros; appended rows
// (16-bit, of type E) are written as the cache stores them, x / scale
// rounded to e4m3. Nothing to finish: issue → cp_async_wait + barrier →
// read.
template <int kRows, int kCols, int kThreads, int E>
struct E4m3RowCopy {
  typedef QuantizedCacheCopy<kRows, kCols, kCols + 8, kThreads, E, false> Layout;
  static constexpr bool kStaged = true;
  static constexpr int kStageBytes = Layout::kStageBytes;
  static constexpr int kStageElements = Layout::kStageElements;
  static constexpr int kChunks = kCols / 16;
  static constexpr int kLanesPerRow = Layout::kLanesPerRow;
  static_assert(kCols % 16 == 0, "rows are whole 16-byte chunks");

  template <class Rows>
  static __device__ __forceinline__ void issue(u16*, u16* staging, const Rows& rows, index_t,
                                               int valid_rows, int valid_cols, int thread) {
    u8* stage = reinterpret_cast<u8*>(staging);
    const int lane = thread % kLanesPerRow;
#pragma unroll 1
    for (int row = thread / kLanesPerRow; row < kRows; row += kThreads / kLanesPerRow) {
      const int key = rows.first + row;
      u8* to = stage + row * kStageBytes;
      const bool valid = row < valid_rows;
      const bool appended = valid && key >= rows.cached;
      const u8* source = valid && !appended ? rows.cache_row(key) : nullptr;
#pragma unroll 1
      for (int c = lane; c < kChunks; c += kLanesPerRow) {
        uint4* chunk = reinterpret_cast<uint4*>(to + 16 * c);
        if (16 * c >= valid_cols || !(source != nullptr || appended))
          *chunk = make_uint4(0, 0, 0, 0);
        else if (appended)
          *chunk = appended_chunk(rows, key - rows.cached, 16 * c);
        else
          copy_chunk(to + 16 * c, source + 16 * c);
      }
    }
  }

 private:
  static __device__ __forceinline__ void copy_chunk(u8* to, const u8* from) {
    if ((reinterpret_cast<u64>(from) & 15) == 0) {
      cp_async_zfill<16>(to, from, 16);
    } else {
      cp_async_zfill<8>(to, from, 8);
      cp_async_zfill<8>(to + 8, from + 8, 8);
    }
  }

  // Columns col .. col + 15 of appended row i as the cache stores them (a
  // few rows a call; not unrolled: beside D = 256's O it would spill).
  template <class Rows>
  static __device__ __forceinline__ uint4 appended_chunk(const Rows& rows, int i, int col) {
    const u16* source = rows.appended + i * rows.appended_stride;
    u32 words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      words[w] = 0;
#pragma unroll 1
      for (int b = 0; b < 4; ++b)
        words[w] |= u32(stored_as_e4m3<E>(source[(col + 4 * w + b) * rows.col_stride],
                                          rows.scale))
                    << (8 * b);
    }
    return make_uint4(words[0], words[1], words[2], words[3]);
  }
};

// The staging's row stride in bytes of a copy that is an E4m3RowCopy
// (kIs), 0 for others (which have none).
template <class Copy, bool kIs>
struct E4m3StageRowBytes {
  static constexpr int value = 0;
};
template <class Copy>
struct E4m3StageRowBytes<Copy, true> {
  static constexpr int value = Copy::kStageBytes;
};

// The Q tile of a kernel over an fp8 cache ([kRows][kCols], rows kStride
// apart, elements of type E) made f16 in place, times the power of two 2^s
// that puts its largest magnitude in [2^13, 2^14): f16 holds every bf16
// value of that range exactly, and the products with the cache's f16 values
// stay far from fp32's subnormals. Returns 2^-s, which brings the scores
// back. Called by all kThreads threads; every warp finds the maximum over
// the whole tile (once a CTA), and the tile is written between barriers.
template <int E, int kRows, int kCols, int kStride, int kThreads>
__device__ __forceinline__ float q_tile_to_f16(u16* q, int thread) {
  if constexpr (E == kF16) return 1.0f;
  float largest = 0.0f;
#pragma unroll 4
  for (int e = thread & 31; e < kRows * kCols; e += 32)
    largest = fmaxf(largest, fabsf(to_float<E>(q[(e / kCols) * kStride + e % kCols])));
#pragma unroll
  for (int offset = 16; offset >= 1; offset /= 2)
    largest = fmaxf(largest, __shfl_xor_sync(0xffffffffu, largest, offset));
  int s = 0;  // an empty tile, or an infinite value, as it is
  if (largest > 0.0f && largest <= 3.402823466e38f) {
    const int exponent = ((__float_as_int(largest) >> 23) & 0xff) - 127;
    s = min_of(max_of(13 - exponent, -126), 127);
  }
  const float up = ldexpf(1.0f, s);
  __syncthreads();  // every warp has read the tile
#pragma unroll 4
  for (int e = thread; e < kRows * kCols; e += kThreads) {
    u16& x = q[(e / kCols) * kStride + e % kCols];
    x = from_float<kF16>(to_float<E>(x) * up);
  }
  __syncthreads();
  return ldexpf(1.0f, -s);
}

}  // namespace flashgen_device
