// The tensor-core and softmax steps of one traversed query block of the
// key/value wgmma kernel (kernels/backward_key_value/wgmma.cuh, which
// derives from this struct) and the tile shapes they need:
//
//   Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ      scores (all operands from shared memory)
//   Pᵀ, dSᵀ                     softmax_side, then pack into A fragments
//   dV += Pᵀ·dO, dK += dSᵀ·Q    products (Pᵀ, dSᵀ from registers)
#pragma once

#include "common.cuh"
#include "softmax/softmax.cuh"
#include "arch/warp_gemm.cuh"
#include "arch/wgmma.cuh"
#include "arch/wgmma_gemm.cuh"
#include "kernels/backward_key_value/query_traversal.cuh"
#include "layout/shared_memory.cuh"

namespace flashgen_device {

// The tiles of the key/value wgmma kernels: the CTA's K and V rows
// (core-matrix layout, arch/wgmma.cuh; fewer elements where a kernel holds
// them in registers), Q and dO of the traversed blocks in stages (the layout
// their copies write: TraversedTile), and those rows' L2 and Dterm.
template <int kKeyElements, int kValueElements, int kBlockN, int kDimQK, int kDimV, int kStages>
struct KeyValueWgmmaTiles {
  u16 k[kKeyElements];
  u16 v[kValueElements];
  u16 q[kStages][kBlockN * kDimQK];
  u16 grad_o[kStages][kBlockN * kDimV];
  float lse_log2[kStages][kBlockN];
  float dterm[kStages][kBlockN];
};

// C (generated): as for BackwardKeyValueWgmma.
template <class C>
struct BackwardKeyValueWgmmaSteps {
  static constexpr int E = C::kElement;
  static constexpr int kBlockN = C::kBlockN;      // query rows per traversed block
  // TMA on rows that are not 16-byte aligned (token-row views:
  // wgmma_producer.cuh): the tiles hold a head's columns shifted past the
  // 32-byte boundary before them, so they are wider.
  static constexpr bool kTokenRows = C::kTma && C::kVec < 8;
  static constexpr int kDimQK = head_tile_width(C::kDimQK, C::kVec, kTokenRows);
  static constexpr int kDimV = head_tile_width(C::kDimV, C::kVec, kTokenRows);
  static constexpr int kStages = 3;
  static constexpr int kQueryTiles = kBlockN / 8;
  // Q and dO stages in the layout their copies write (TraversedTile: TMA's
  // slices or swizzled panels, or the cp.async core-matrix layout).
  static constexpr bool kTmaLayout = C::kTma;
  typedef TraversedTile<kBlockN, kDimQK, kTmaLayout, C::kSwizzle> Queries;
  typedef TraversedTile<kBlockN, kDimV, kTmaLayout, C::kSwizzle> GradOs;
  typedef QueryTraversal<kBlockN> Traversal;

  // Issues Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for block `stage` (overwriting st, dpt).
  template <class Storage>
  static __device__ __forceinline__ void scores(float (&st)[1][kQueryTiles][4],
                                                float (&dpt)[1][kQueryTiles][4], u64 k_desc,
                                                u64 v_desc, Storage& smem, int stage) {
    // Q and dO read K-major.
    const u64 q_desc = Queries::k_major(smem.q[stage]);
    const u64 grad_o_desc = GradOs::k_major(smem.grad_o[stage]);
    gemm_shared<E, kDimQK / 16, Queries::kKMajorStep>(flat(st), k_desc, q_desc);  // A (K, V) steps 256 bytes
    gemm_shared<E, kDimV / 16, GradOs::kKMajorStep>(flat(dpt), v_desc, grad_o_desc);
  }

  // Issues dV += Pᵀ·dO and dK += dSᵀ·Q for the block in `stage`.
  template <class Storage>
  static __device__ __forceinline__ void products(float (&dk)[1][kDimQK / 8][4],
                                                  float (&dv)[1][kDimV / 8][4],
                                                  const u32 (&pt_frag)[kBlockN / 16][1][4],
                                                  const u32 (&dst_frag)[kBlockN / 16][1][4],
                                                  Storage& smem, int stage) {
    // dO and Q read MN-major (16 queries a k step).
    const u64 grad_o_desc = GradOs::mn_major(smem.grad_o[stage]);
    const u64 q_desc = Queries::mn_major(smem.q[stage]);
    gemm_accumulate<E, GradOs::kMnMajorStep>(flat(dv), pt_frag, grad_o_desc);
    gemm_accumulate<E, Queries::kMnMajorStep>(flat(dk), dst_frag, q_desc);
  }

  // Pᵀ = exp2(Sᵀ·scale·log2e − L2[query]) (masked) in st, dSᵀ in dpt.
  template <class Storage>
  static __device__ __forceinline__ void softmax_side(float (&st)[1][kQueryTiles][4],
                                                      float (&dpt)[1][kQueryTiles][4],
                                                      const Storage& smem,
                                                      const AttentionParams& p,
                                                      const Traversal& walk, int j, int warp_key0,
                                                      int lane) {
    const int stage = j % kStages;
    transposed_probabilities<C>(st, smem.lse_log2[stage], p, walk, j, warp_key0,
                                         lane);
    transposed_score_gradients<C>(dpt, st, smem.lse_log2[stage], smem.dterm[stage], p, walk, j,
                                  warp_key0, lane);
  }

  static __device__ __forceinline__ void pack(u32 (&pt_frag)[kBlockN / 16][1][4],
                                              u32 (&dst_frag)[kBlockN / 16][1][4],
                                              const float (&st)[1][kQueryTiles][4],
                                              const float (&dpt)[1][kQueryTiles][4]) {
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
      pack_a_from_acc<E>(pt_frag[ks], st, ks);
      pack_a_from_acc<E>(dst_frag[ks], dpt, ks);
    }
  }
};

}  // namespace flashgen_device
