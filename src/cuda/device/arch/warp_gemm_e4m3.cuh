// Warp GEMMs whose B operand is e4m3 bytes in shared memory (an fp8 KV
// cache's rows, staged as they are stored), converted to f16 on their way
// into the fragments: one cvt.rn.f16x2.e4m3x2 a pair, no converted tile.
// The kernel computes over such a cache in f16 (copy/quantized_cache.cuh).
//
// The k of a GEMM is summed over, so its order is free as long as A and B
// agree. For S = Q·Kᵀ (K stored [key][dim], k = dim) a lane reads the four
// bytes of its key at dims 16·ks + 4t .. 4t + 3 (one 32-bit load, no bank
// conflict at the staging's row stride) and takes them as the fragment's k
// 2t, 2t + 1, 2t + 8, 2t + 9; Q's A fragments are read in that order
// (load_a_rows_e4m3_order). For O = P·V (V stored [key][dim], k = key)
// ldmatrix.trans moves byte pairs: a lane gets keys 2t, 2t + 1 of dims
// 2g, 2g + 1, and a byte permutation makes two B fragments of them, one
// over the group's even dims, one over its odd ones. O's n-tiles are so
// each 16 columns' even, then odd columns; o_to_column_order puts them back
// in the order of the other kernels' C fragments before O is merged or
// stored.
#pragma once

#include "arch/mma.cuh"
#include "arch/warp_gemm.cuh"

namespace flashgen_device {

// Q's A fragments for one k step (16 dims from k0) in the k order of the
// e4m3 B fragments: rows g and g + 8 of each row tile, dims k0 + 4t .. 4t + 3
// (a0, a2; a1, a3 for row g + 8). `tile`: f16, row stride a multiple of 4.
template <int kRowTiles>
__device__ __forceinline__ void load_a_rows_e4m3_order(u32 (&a)[kRowTiles][4], const u16* tile,
                                                       int stride, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint2 dims =
          *reinterpret_cast<const uint2*>(tile + (rt * 16 + g + 8 * h) * stride + k0 + 4 * t);
      a[rt][h] = dims.x;
      a[rt][2 + h] = dims.y;
    }
}

// acc += A(k step from k0) · Bᵀ, B the kNTiles · 8 e4m3 rows from `rows`
// (row_bytes apart, 4-byte aligned) in the k order above.
template <int kRowTiles, int kNTiles>
__device__ __forceinline__ void mma_k_step_e4m3_nk(float (&acc)[kRowTiles][kNTiles][4],
                                                   const u32 (&a)[kRowTiles][4], const u8* rows,
                                                   int row_bytes, int k0, int lane) {
  const u8* mine = rows + (lane >> 2) * row_bytes + k0 + 4 * (lane & 3);
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
    const u32 bytes = *reinterpret_cast<const u32*>(mine + nt * 8 * row_bytes);
    const u32 b0 = e4m3_pair_to_f16(bytes & 0xffff), b1 = e4m3_pair_to_f16(bytes >> 16);
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) mma_16x8x16<kF16>(acc[rt][nt], a[rt], b0, b1);
  }
}

// acc += A(16 keys from k0) · B, B the e4m3 rows of those keys from `rows`
// (row_bytes apart, 16-byte aligned; readable 16 bytes past kNTiles · 4
// columns where kNTiles / 2 is odd), n-tiles 2j and 2j + 1 the even and odd
// columns of columns 16j .. 16j + 15.
template <int kRowTiles, int kNTiles>
__device__ __forceinline__ void mma_k_step_e4m3_kn(float (&acc)[kRowTiles][kNTiles][4],
                                                   const u32 (&a)[kRowTiles][4], const u8* rows,
                                                   int row_bytes, int k0, int lane) {
  static_assert(kNTiles % 2 == 0, "n-tiles are a group's even and odd columns");
  constexpr int kGroups = kNTiles / 2;  // of 16 columns
  // Matrices: 0 keys 0-7 of group j, 1 keys 8-15 of group j, 2 and 3 the
  // same of group j + 1; lane l addresses row l % 8 of matrix l / 8.
  const int matrix = lane >> 3;
  const u8* mine = rows + (k0 + (matrix & 1) * 8 + (lane & 7)) * row_bytes + (matrix >> 1) * 16;
#pragma unroll
  for (int j = 0; j < kGroups; j += 2) {
    u32 r[4];
    ldmatrix_x4_trans(r, shared_address(mine + j * 16));
#pragma unroll
    for (int half = 0; half < 2 && j + half < kGroups; ++half) {
      // r[2·half] keys 2t, 2t + 1, r[2·half + 1] keys 8 + 2t, 9 + 2t; bytes
      // (key, dim): (2t, 2g) (2t, 2g+1) (2t+1, 2g) (2t+1, 2g+1).
      const u32 lo = r[2 * half], hi = r[2 * half + 1];
      const u32 even0 = e4m3_pair_to_f16(__byte_perm(lo, 0, 0x0020));
      const u32 even1 = e4m3_pair_to_f16(__byte_perm(hi, 0, 0x0020));
      const u32 odd0 = e4m3_pair_to_f16(__byte_perm(lo, 0, 0x0031));
      const u32 odd1 = e4m3_pair_to_f16(__byte_perm(hi, 0, 0x0031));
      const int nt = 2 * (j + half);
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt) {
        mma_16x8x16<kF16>(acc[rt][nt], a[rt], even0, even1);
        mma_16x8x16<kF16>(acc[rt][nt + 1], a[rt], odd0, odd1);
      }
    }
  }
}

// acc += A · B over kKSteps, B's e4m3 rows k-major (`rows`, row_bytes apart):
// A from fp32 accumulators (rounded to f16), acc's n-tiles in
// mma_k_step_e4m3_kn's column order.
template <int kRowTiles, int kNTiles, int kKSteps>
__device__ __forceinline__ void gemm_acc_kn_e4m3(float (&acc)[kRowTiles][kNTiles][4],
                                                 const float (&a)[kRowTiles][2 * kKSteps][4],
                                                 const u8* rows, int row_bytes, int lane) {
  for_each_acc_k_step<kF16, kRowTiles, kKSteps>(a, [&](const u32(&frag)[kRowTiles][4], int k0) {
    mma_k_step_e4m3_kn(acc, frag, rows, row_bytes, k0, lane);
  });
}

// O's n-tiles from the column order of mma_k_step_e4m3_kn back to the C
// fragments' (lane t holding columns 2t, 2t + 1 of each 8): lane t holds
// columns 4t .. 4t + 3 of each 16 as even c0, odd c0, even c1, odd c1 (and
// c2, c3 for row g + 8); columns 2t', 2t' + 1 and 8 + 2t', 9 + 2t' are
// lanes t' / 2 and 2 + t' / 2's, their c0 or their c1 by t''s parity.
template <int kRowTiles, int kNTiles>
__device__ __forceinline__ void o_to_column_order(float (&o)[kRowTiles][kNTiles][4], int lane) {
  const int t = lane & 3, first = (lane & ~3) | (t >> 1), second = first + 2;
  const bool odd_lane = t & 1;
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int j = 0; j < kNTiles / 2; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows g, g + 8: c0 c1, c2 c3
        float* even = &o[rt][2 * j][2 * h];
        float* odd = &o[rt][2 * j + 1][2 * h];
        float got[2][4];  // [source lane][even c0, odd c0, even c1, odd c1]
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const int from = s == 0 ? first : second;
          got[s][0] = __shfl_sync(0xffffffffu, even[0], from);
          got[s][1] = __shfl_sync(0xffffffffu, odd[0], from);
          got[s][2] = __shfl_sync(0xffffffffu, even[1], from);
          got[s][3] = __shfl_sync(0xffffffffu, odd[1], from);
        }
        even[0] = odd_lane ? got[0][2] : got[0][0];
        even[1] = odd_lane ? got[0][3] : got[0][1];
        odd[0] = odd_lane ? got[1][2] : got[1][0];
        odd[1] = odd_lane ? got[1][3] : got[1][1];
      }
}

}  // namespace flashgen_device
