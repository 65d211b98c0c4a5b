// The tiles of the split=dims key/value wgmma kernel
// (kernels/backward_key_value/wgmma_dims.cuh, which derives from this
// struct) and the GEMMs each computing warpgroup issues over its half of
// the head dims: Sᵀ_g = K_g·Q_gᵀ, dPᵀ_g = V_g·dO_gᵀ, dV_g += Pᵀ·dO_g,
// dK_g += dSᵀ·Q_g, with the descriptors of its half.
#pragma once

#include "kernels/backward_key_value/wgmma_producer.cuh"
#include "layout/shared_memory.cuh"
#include "pipeline/warpgroup_exchange.cuh"
#include "arch/wgmma_gemm.cuh"

namespace flashgen_device {

// C (generated): as for BackwardKeyValueWgmmaDims.
template <class C>
struct BackwardKeyValueWgmmaDimsSteps : SplitDimsShape<C> {
  typedef SplitDimsShape<C> Shape;  // 64 key rows
  using Shape::E, Shape::kBlockM, Shape::kBlockN, Shape::kDimQK, Shape::kDimV, Shape::kHalfQK;
  using Shape::kHalfV;
  typedef typename Shape::TraversedQK Queries;
  typedef typename Shape::TraversedV GradOs;
  static constexpr int kStages = C::kStages;
  static constexpr int kQueryTiles = kBlockN / 8;
  static constexpr bool kKeysInRegisters = C::kCacheK, kValuesInRegisters = C::kCacheV;
  // The dK CTA reads K's tile even where the dV CTA holds K.
  static constexpr int kKeyTileElements = kBlockM * kDimQK;
  static constexpr int kValueTileElements = held_tile_elements(kValuesInRegisters, kBlockM * kDimV);
  static_assert(C::kWarps == 8 && C::kHeadChunks == 2,
                "two warpgroups over the same 64 keys; a dV and a dK CTA per key block");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256 && kHalfQK <= 256 && kHalfV <= 256,
                "wgmma n is 16..256; half of dK (dV) lives in each warpgroup's registers");
  typedef QueryTraversal<kBlockN> Traversal;

  // Exchanged per thread: the partial Sᵀ and dPᵀ of the other warpgroup's
  // rows, then the words of Pᵀ's (dSᵀ's) A fragments of its own.
  static constexpr int kScoreFloats = other_rows_floats<kQueryTiles>();
  static constexpr int kFragmentWords = own_words<kBlockN / 16>();

  struct Tiles : KeyValueWgmmaTiles<kKeyTileElements, kValueTileElements, kBlockN, kDimQK, kDimV,
                                     kStages> {
    float partial[2][2 * kScoreFloats][kWarpgroupThreads];
    u32 fragments[2][kFragmentWords][kWarpgroupThreads];
  };
  // The tiles, (token rows) the fixed stages' barriers, then a full and an
  // empty barrier per stage.
  struct SharedStorage : Tiles, FixedStages<Shape::kTokenRows, kStages> {
    StagePipeline<kStages> pipeline;
  };

  // Named barriers of the exchanges (0 is __syncthreads').
  static constexpr int kPartialsBarrier = 1, kFragmentsBarrier = 2;

  // This warpgroup's half of the head dims: K's and Q's columns g·kHalfQK
  // on, V's and dO's g·kHalfV on (16 columns are one k step's distance in
  // either reading of a traversed tile).
  static __device__ __forceinline__ u64 key_half_descriptor(const SharedStorage& smem, int group) {
    return matrix_descriptor(smem.k + 8 * group * kHalfQK, 128, kDimQK * 16);
  }
  static __device__ __forceinline__ u64 value_half_descriptor(const SharedStorage& smem,
                                                              int group) {
    return matrix_descriptor(smem.v + 8 * group * kHalfV, 128, kDimV * 16);
  }
  static __device__ __forceinline__ int query_half(int group) {
    return group * (kHalfQK / 16) * Queries::kKMajorStep;
  }
  static __device__ __forceinline__ int grad_o_half(int group) {
    return group * (kHalfV / 16) * GradOs::kKMajorStep;
  }

  // Issues Sᵀ_g = K_g·Q_gᵀ (overwriting st): K from shared memory, Q read K-major.
  static __device__ __forceinline__ void half_scores(float (&st)[1][kQueryTiles][4], u64 k_desc,
                                                     const u16* q_tile, int q_half) {
    const u64 q_desc = Queries::k_major(q_tile) + q_half;
    gemm_shared<E, kHalfQK / 16, Queries::kKMajorStep>(flat(st), k_desc, q_desc);  // A (K) steps 256 bytes
  }

  // Issues dPᵀ_g = V_g·dO_gᵀ (overwriting dpt): V from shared memory, dO read K-major.
  static __device__ __forceinline__ void half_grad_scores(float (&dpt)[1][kQueryTiles][4],
                                                          u64 v_desc, const u16* grad_o_tile,
                                                          int o_half) {
    const u64 grad_o_desc = GradOs::k_major(grad_o_tile) + o_half;
    gemm_shared<E, kHalfV / 16, GradOs::kKMajorStep>(flat(dpt), v_desc, grad_o_desc);
  }

  // Issues dV_g += Pᵀ·dO_g (dO read MN-major, 16 queries a k step).
  static __device__ __forceinline__ void half_value_product(
      float (&dv)[1][kHalfV / 8][4], const u32 (&pt_frag)[kBlockN / 16][1][4],
      const u16* grad_o_tile, int o_half) {
    const u64 grad_o_desc = GradOs::mn_major(grad_o_tile) + o_half;
    gemm_accumulate<E, GradOs::kMnMajorStep>(flat(dv), pt_frag, grad_o_desc);
  }

  // Issues dK_g += dSᵀ·Q_g (Q read MN-major).
  static __device__ __forceinline__ void half_key_product(float (&dk)[1][kHalfQK / 8][4],
                                                          const u32 (&dst_frag)[kBlockN / 16][1][4],
                                                          const u16* q_tile, int q_half) {
    const u64 q_desc = Queries::mn_major(q_tile) + q_half;
    gemm_accumulate<E, Queries::kMnMajorStep>(flat(dk), dst_frag, q_desc);
  }
};

}  // namespace flashgen_device
