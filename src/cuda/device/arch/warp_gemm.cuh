// Warp-level GEMMs on m16n8k16 tiles. A warp owns 16 · kRowTiles rows of the
// output and kNTiles n-tiles of 8 columns; fragments are named after the
// operand they hold. Every function accumulates (acc += ...).
//
//   *_nk: B stored n-major in shared memory ([n][k], e.g. K for S = Q·Kᵀ)
//   *_kn: B stored k-major in shared memory ([k][n], e.g. V for O = P·V),
//         transposed on the way by ldmatrix.trans
#pragma once

#include "arch/mma.cuh"

namespace flashgen_device {

// Accumulators (float) or A fragments (u32 words) set to zero.
template <class T, int kRowTiles, int kNTiles>
__device__ __forceinline__ void zero(T (&acc)[kRowTiles][kNTiles][4]) {
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[rt][nt][i] = T(0);
}

// A-fragments for one k step, from a row-major shared tile (rows of the warp).
template <int kRowTiles>
__device__ __forceinline__ void load_a_rows(u32 (&a)[kRowTiles][4], const u16* tile, int stride,
                                            int k0, int lane) {
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
    load_a_fragment(a[rt], tile + rt * 16 * stride + k0, stride, lane);
}

// A-fragments of kSteps k steps (16 columns each, from column col0) of a
// warp's 16 rows, read straight from global memory (contiguous columns):
// for operands a CTA loads once and keeps. Rows at or past valid_rows and
// columns at or past valid_cols read as zero. `shift`: the fragments'
// column of the rows' first (token-row tiles; a multiple of kVec), the
// columns before it zero. Rows aligned to 4 bytes or more (kVec >= 2; an
// even valid_cols) are read in pairs, others element by element.
template <int kSteps, int kVec = 8>
__device__ __forceinline__ void load_a_fragments_global(u32 (&a)[kSteps][4], const u16* rows,
                                                        index_t row_stride, int valid_rows,
                                                        int col0, int valid_cols, int lane,
                                                        int shift = 0) {
  const int row = lane >> 2, col = col0 + (lane & 3) * 2 - shift;
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // The A layout: rows g and g + 8, columns 2t and 2t + 8 (i = 0..3).
      const int r = row + (i & 1) * 8, c = col + ks * 16 + (i >> 1) * 8;
      const u16* pair = rows + r * row_stride + c;
      if constexpr (kVec >= 2) {
        a[ks][i] = r < valid_rows && c >= 0 && c < valid_cols
                       ? *reinterpret_cast<const u32*>(pair)
                       : 0u;
      } else {
        const u32 lo = r < valid_rows && c >= 0 && c < valid_cols ? pair[0] : 0u;
        const u32 hi = r < valid_rows && c + 1 >= 0 && c + 1 < valid_cols ? pair[1] : 0u;
        a[ks][i] = lo | (hi << 16);
      }
    }
}

// The same for the 16 rows from row0 of one head of `t` (sequence length seq_len).
template <int kSteps, int kVec = 8>
__device__ __forceinline__ void load_a_fragments_global(u32 (&a)[kSteps][4], const TensorArg& t,
                                                        int batch, int head, int row0, int seq_len,
                                                        int col0, int valid_cols, int lane,
                                                        int shift = 0) {
  load_a_fragments_global<kSteps, kVec>(a, head_slice<const u16>(t, batch, head) +
                                               row0 * t.stride_seq,
                                        t.stride_seq, seq_len - row0, col0, valid_cols, lane,
                                        shift);
}

// A-fragments for one k step (16 columns) from fp32 accumulators of the same
// rows: the C layout of two adjacent n-tiles is the A layout of one k step.
template <int E, int kRowTiles, int kTiles>
__device__ __forceinline__ void pack_a_from_acc(u32 (&a)[kRowTiles][4],
                                                const float (&c)[kRowTiles][kTiles][4], int ks) {
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
    a[rt][0] = pack2<E>(c[rt][2 * ks][0], c[rt][2 * ks][1]);
    a[rt][1] = pack2<E>(c[rt][2 * ks][2], c[rt][2 * ks][3]);
    a[rt][2] = pack2<E>(c[rt][2 * ks + 1][0], c[rt][2 * ks + 1][1]);
    a[rt][3] = pack2<E>(c[rt][2 * ks + 1][2], c[rt][2 * ks + 1][3]);
  }
}

// acc += A(k step) · B(k step): b n-major (the k step is 16 columns of its
// rows) or, with kKMajor, k-major (16 of its rows).
template <int E, bool kKMajor, int kRowTiles, int kNTiles>
__device__ __forceinline__ void mma_k_step(float (&acc)[kRowTiles][kNTiles][4],
                                           const u32 (&a)[kRowTiles][4], const u16* b,
                                           int b_stride, int k0, int lane) {
  static_assert(kNTiles % 2 == 0, "n-tiles are loaded in pairs");
#pragma unroll
  for (int np = 0; np < kNTiles / 2; ++np) {
    u32 frag[4];
    if constexpr (kKMajor)
      load_b_fragments_kn(frag, b + k0 * b_stride + np * 16, b_stride, lane);
    else
      load_b_fragments_nk(frag, b + np * 16 * b_stride + k0, b_stride, lane);
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      mma_16x8x16<E>(acc[rt][2 * np], a[rt], frag[0], frag[1]);
      mma_16x8x16<E>(acc[rt][2 * np + 1], a[rt], frag[2], frag[3]);
    }
  }
}

// acc += A · Bᵀ over kKSteps: A row-major in shared memory, B n-major.
template <int E, int kRowTiles, int kNTiles, int kKSteps>
__device__ __forceinline__ void gemm_smem_nk(float (&acc)[kRowTiles][kNTiles][4], const u16* a,
                                             int a_stride, const u16* b, int b_stride, int lane) {
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    u32 frag[kRowTiles][4];
    load_a_rows(frag, a, a_stride, ks * 16, lane);
    mma_k_step<E, false>(acc, frag, b, b_stride, ks * 16, lane);
  }
}

// A product over kKSteps k steps of 16 whose A comes from fp32 accumulators
// (rounded to E): k_step(frag, k0) multiplies each step's A fragments.
template <int E, int kRowTiles, int kKSteps, class KStep>
__device__ __forceinline__ void for_each_acc_k_step(const float (&a)[kRowTiles][2 * kKSteps][4],
                                                    KStep k_step) {
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    u32 frag[kRowTiles][4];
    pack_a_from_acc<E>(frag, a, ks);
    k_step(frag, ks * 16);
  }
}

// acc += A · B over kKSteps: A from fp32 accumulators (rounded to E), B k-major.
template <int E, int kRowTiles, int kNTiles, int kKSteps>
__device__ __forceinline__ void gemm_acc_kn(float (&acc)[kRowTiles][kNTiles][4],
                                            const float (&a)[kRowTiles][2 * kKSteps][4],
                                            const u16* b, int b_stride, int lane) {
  for_each_acc_k_step<E, kRowTiles, kKSteps>(a, [&](const u32(&frag)[kRowTiles][4], int k0) {
    mma_k_step<E, true>(acc, frag, b, b_stride, k0, lane);
  });
}

// Multiplies each of a thread's two rows per row tile by its own factor.
template <int kRowTiles, int kNTiles>
__device__ __forceinline__ void scale_rows(float (&acc)[kRowTiles][kNTiles][4],
                                           const float (&factor)[kRowTiles][2]) {
  for_each_element(acc, [&](float& x, int rt, int, int i) { x *= factor[rt][i >> 1]; });
}

}  // namespace flashgen_device
