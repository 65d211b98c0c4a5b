// The tensor-core steps of one key block of the forward wgmma kernel
// (kernels/forward/wgmma.cuh, which derives from this struct) and the tile
// shapes they need:
//
//   S = Q·Kᵀ                      scores (Q and K from shared memory)
//   P = exp2(S·scale·log2e − m)   block_softmax (masked, online softmax)
//   O += P·V                      accumulate_output (P from registers)
#pragma once

#include "common.cuh"
#include "softmax/mask.cuh"
#include "softmax/softmax.cuh"
#include "arch/wgmma.cuh"
#include "arch/wgmma_gemm.cuh"
#include "layout/shared_memory.cuh"

namespace flashgen_device {

// C (generated): as for ForwardWgmma.
template <class C>
struct ForwardWgmmaSteps {
  static constexpr int E = C::kElement;
  static constexpr int kBlockN = C::kBlockN;
  // TMA on rows that are not 16-byte aligned reads a head's columns from the
  // 32-byte boundary before them (token-row views: wgmma_producer.cuh): the
  // tiles hold them shifted by up to 16 - kVec columns, so they are wider.
  static constexpr bool kTokenRows = C::kTma && C::kVec < 8;
  // Value columns per CTA: all of Dv, or one chunk of it.
  static constexpr int kChunkCols = chunk_width(C::kDimV, C::kHeadChunks);
  // The k of S = Q·Kᵀ and the n of O = P·V: the tiles' widths, zero-filled.
  static constexpr int kDimQK = head_tile_width(C::kDimQK, C::kVec, kTokenRows);
  static constexpr int kDimV =
      forward_value_tile_width(C::kDimV, C::kHeadChunks, C::kVec, kTokenRows);
  static constexpr int kScoreTiles = kBlockN / 8;
  // K and V stages in the layout their copies write (TraversedTile): TMA's
  // slices (kTma; whole-sector 16-column panels swizzled by 32 bytes with
  // kSwizzle = 32) or the cp.async core-matrix layout.
  static constexpr bool kTmaLayout = C::kTma;
  typedef TraversedTile<kBlockN, kDimQK, kTmaLayout, C::kSwizzle> Keys;
  typedef TraversedTile<kBlockN, kDimV, kTmaLayout, C::kSwizzle> Values;

  // Issues S = Q·Kᵀ for this warpgroup's rows (overwriting s).
  static __device__ __forceinline__ void scores(float (&s)[1][kScoreTiles][4], u64 q_desc,
                                                const u16* k_tile) {
    const u64 k_desc = Keys::k_major(k_tile);
    gemm_shared<E, kDimQK / 16, Keys::kKMajorStep>(flat(s), q_desc, k_desc);
  }

  // Issues O += P·V: one product up to 256 columns (wgmma's widest n), a
  // second over the columns past them (a token-row tile of a head of about
  // 241 to 272 columns, up to kForwardMostValueColumns wide).
  static constexpr int kFirstProductCols = kDimV < 256 ? kDimV : 256;
  static __device__ __forceinline__ void accumulate_output(float (&o)[kDimV / 2],
                                                           const u32 (&p_frag)[kBlockN / 16][1][4],
                                                           const u16* v_tile) {
    gemm_accumulate<E, Values::kMnMajorStep>(registers_from<0, kFirstProductCols / 2>(o), p_frag,
                                             Values::mn_major(v_tile));
    if constexpr (kDimV > kFirstProductCols)
      gemm_accumulate<E, Values::kMnMajorStep>(
          registers_from<kFirstProductCols / 2, (kDimV - kFirstProductCols) / 2>(o), p_frag,
          Values::mn_major(Values::from_column(v_tile, kFirstProductCols)));
  }

  // Turns the scores of the block at key0 into logits (site: where they
  // belong, ScoreSite), masks them and turns them into P.
  static __device__ __forceinline__ void block_softmax(float (&s)[1][kScoreTiles][4],
                                                       float (&correction)[1][2],
                                                       OnlineSoftmax<1>& softmax,
                                                       const AttentionParams& p, int key0,
                                                       int warp_row0, int lane,
                                                       const ScoreSite& site) {
    logits<C>(s, p, warp_row0, key0, lane, site);
    softmax.update(s, correction);
  }
};

}  // namespace flashgen_device
