// The tiles of the split=dims query wgmma kernel
// (kernels/backward_query/wgmma_split.cuh, which derives from this struct)
// and the GEMMs each computing warpgroup issues over its half of the head
// dims: S_g = Q_g·K_gᵀ, dP_g = dO_g·V_gᵀ (from shared memory or held
// fragments) and dQ_g += dS·K_g.
#pragma once

#include "kernels/backward_query/wgmma.cuh"
#include "pipeline/warp_specialized.cuh"
#include "arch/tma.cuh"
#include "layout/shared_memory.cuh"
#include "pipeline/warpgroup_exchange.cuh"
#include "arch/wgmma_gemm.cuh"

namespace flashgen_device {

// C (generated): as for BackwardQueryWgmmaSplit.
template <class C>
struct BackwardQueryWgmmaSplitSteps : SplitDimsShape<C> {
  typedef SplitDimsShape<C> Shape;  // 64 query rows
  using Shape::E, Shape::kBlockM, Shape::kBlockN, Shape::kDimQK, Shape::kDimV, Shape::kHalfQK;
  using Shape::kHalfV;
  typedef typename Shape::TraversedQK Keys;
  typedef typename Shape::TraversedV Values;
  static constexpr int kKeyStages = C::kKeyStages, kValueStages = C::kValueStages;
  static constexpr int kKeyTiles = kBlockN / 8;
  static constexpr int kGroupThreads = kWarpgroupThreads;
  static_assert(C::kWarps == 8 && C::kHeadChunks == 1, "two warpgroups over the same 64 rows");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256 && kHalfQK <= 256,
                "wgmma n is 16..256; half of dQ lives in each warpgroup's registers");
  static constexpr bool kQueriesInRegisters = C::kCacheQ, kGradOsInRegisters = C::kCacheGradO;
  static constexpr int kQueryTileElements = held_tile_elements(kQueriesInRegisters, kBlockM * kDimQK);
  static constexpr int kGradOTileElements = held_tile_elements(kGradOsInRegisters, kBlockM * kDimV);

  // Exchanged per thread (pipeline/warpgroup_exchange.cuh): the partial S and dP of
  // the other warpgroup's rows, then the words of dS's A fragments of its own.
  static constexpr int kPartialFloats = 2 * other_rows_floats<kKeyTiles>();
  static constexpr int kGradWords = own_words<kBlockN / 16>();

  struct Tiles {
    u16 q[kQueryTileElements];  // core-matrix layout (arch/wgmma.cuh)
    u16 grad_o[kGradOTileElements];
    u16 k[kKeyStages][kBlockN * kDimQK];  // TMA's layout (TraversedTile)
    u16 v[kValueStages][kBlockN * kDimV];
    float lse_log2[kBlockM];
    float dterm[kBlockM];
    // [writing warpgroup][value][thread]. One buffer each: a warpgroup
    // writes again only after the barrier that follows the other's read.
    float partial[2][kPartialFloats][kGroupThreads];
    u32 grad_scores[2][kGradWords][kGroupThreads];
  };
  // The tiles, (token rows) the fixed stages' barriers (as deep as V's
  // pipeline, the shallower), then the K and the V pipelines.
  struct SharedStorage : Tiles, FixedStages<Shape::kTokenRows, kValueStages> {
    StagePipeline<kKeyStages> keys;
    StagePipeline<kValueStages> values;
  };

  // Named barriers of the exchanges (0 is __syncthreads').
  static constexpr int kPartialsBarrier = 1, kGradScoresBarrier = 2;

  static constexpr int kSliceCols = tma_slice_columns(C::kSwizzle);

  // Issues S_g = Q_g·K_gᵀ and dP_g = dO_g·V_gᵀ (overwriting s, dp): Q and
  // dO from shared memory or their held fragments, K and V read K-major,
  // from this warpgroup's half.
  static __device__ __forceinline__ void half_scores(
      float (&s)[1][kKeyTiles][4], float (&dp)[1][kKeyTiles][4], u64 q_desc, u64 grad_o_desc,
      const u32 (&q_frag)[kHalfQK / 16][4], const u32 (&grad_o_frag)[kHalfV / 16][4],
      const u16* k_tile, const u16* v_tile, int key_half, int value_half) {
    half_contraction<kQueriesInRegisters, Keys>(s, q_desc, q_frag, Keys::k_major(k_tile) + key_half);
    half_contraction<kGradOsInRegisters, Values>(dp, grad_o_desc, grad_o_frag,
                                                 Values::k_major(v_tile) + value_half);
  }

  // acc = A·Bᵀ over a warpgroup's half: A (Q or dO, 64 rows) from its
  // core-matrix tile (steps of 256 bytes) or its held fragments, B (K or V)
  // read K-major from a traversed tile.
  template <bool kHeld, class Tile, int kSteps>
  static __device__ __forceinline__ void half_contraction(float (&acc)[1][kKeyTiles][4],
                                                          u64 a_desc,
                                                          const u32 (&a_frag)[kSteps][4],
                                                          u64 b_desc) {
    if constexpr (kHeld)
      gemm_registers<E, Tile::kKMajorStep>(flat(acc), a_frag, b_desc);
    else
      gemm_shared<E, kSteps, Tile::kKMajorStep>(flat(acc), a_desc, b_desc);
  }

  // Issues dQ_g += dS·K_g (K read MN-major from this warpgroup's columns;
  // 16 columns are one k step's distance in either reading).
  static __device__ __forceinline__ void half_product(float (&dq)[1][kHalfQK / 8][4],
                                                      const u32 (&ds_frag)[kBlockN / 16][1][4],
                                                      const u16* k_tile, int key_half) {
    const u64 k_desc = Keys::mn_major(k_tile) + key_half;
    gemm_accumulate<E, Keys::kMnMajorStep>(flat(dq), ds_frag, k_desc);
  }
};

}  // namespace flashgen_device
