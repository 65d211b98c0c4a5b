// The atomic backward on wgmma (backward_atomic with a producer warpgroup,
// kernels/backward_key_value/wgmma_producer.cuh): the key/value kernel's
// four GEMMs per traversed query block, plus the block's share of dQ
//
//   dQ[block] += dS·K     wgmma, dS and K from shared memory (both MN-major)
//
// added into the fp32 accumulator with vector reductions (red.global.add),
// so the backward is five GEMMs instead of seven, and not deterministic.
// dQ needs every key of the CTA, that is every warpgroup's dSᵀ: each
// warpgroup stores its 64 rows of dSᵀ into a tile of the CTA (two tiles,
// alternating by block), the computing warps meet at a named barrier, and
// each warpgroup then computes its own columns of dQ over all the keys.
//
// Per block j, in order: Sᵀ(j) issued; block j − 1's products and dQ
// waited for and its dQ added while Sᵀ(j) runs; dPᵀ(j); Pᵀ and dSᵀ; dSᵀ
// stored; dV += Pᵀ·dO and dK += dSᵀ·Q issued; the barrier; dQ(j) issued,
// left running into block j + 1. The block's dQ is 64 queries: one wgmma
// m-tile. (Issuing Sᵀ(j) and dPᵀ(j) together before the add kept 32 more
// registers live: at D = 128 that spilled 128 bytes.)
#pragma once

#include "common.cuh"
#include "arch/warp_gemm.cuh"
#include "arch/wgmma.cuh"
#include "kernels/row_kernels.cuh"
#include "pipeline/producer_pipeline.cuh"

namespace flashgen_device {

// Barrier 1 (0 is __syncthreads): the computing warps once a block's dSᵀ
// tile is whole.
constexpr int kGradQBarrier = 1;

// dSᵀ of a block, [kKeys][kQueries] in the core-matrix layout
// (arch/wgmma.cuh), two of them so that a warpgroup may store block j + 1's
// while another still reads block j's.
template <int kKeys, int kQueries>
struct ScoresGradientTiles {
  u16 ds[2][kKeys * kQueries];
};
struct NoTiles {};

// Steps: the key/value kernel's (BackwardKeyValueWgmmaSteps); kWarps
// computing warps of 16 keys each.
template <class C, class Steps>
struct GradQAtomics {
  static constexpr int E = C::kElement;
  static constexpr int kBlockM = C::kWarps * 16;  // the CTA's keys
  static constexpr int kBlockN = Steps::kBlockN;  // the block's queries
  static constexpr int kDimQK = Steps::kDimQK;
  static constexpr int kGroups = C::kWarps / 4;
  static constexpr int kGradQCols = kDimQK / kGroups;  // a warpgroup's columns of dQ
  static constexpr int kQueryTiles = Steps::kQueryTiles;
  static_assert(kBlockN == 64, "a block's dQ is one wgmma m-tile of 64 queries");
  static_assert(kDimQK % (16 * kGroups) == 0 && kGradQCols <= 256,
                "each warpgroup takes a multiple of 16 columns of dQ");
  static_assert(!Steps::kTokenRows && C::kVec == 8, "16-byte rows: dQ's columns are the tile's");

  typedef ScoresGradientTiles<kBlockM, kBlockN> Tiles;

  // Stores this warp's 16 rows of dSᵀ (dst_frag: the A fragments of dK's
  // GEMM, bf16 pairs of adjacent queries) into `tile`; a warp's 32 stores
  // of one fragment fill 32 consecutive words.
  static __device__ __forceinline__ void store_scores_gradient(u16* tile,
                                                               const u32 (&dst_frag)[kBlockN / 16][1][4],
                                                               int warp, int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // i & 1: rows g + 8; i >> 1: the second 8 queries
        const int row_group = warp * 2 + (i & 1), col_group = ks * 2 + (i >> 1);
        *reinterpret_cast<u32*>(tile + (row_group * (kBlockN / 8) + col_group) * 64 + g * 8 +
                                2 * t) = dst_frag[ks][0][i];
      }
  }

  // Issues dQ[:, group's columns] = dS·K over the CTA's keys: A = dS read
  // MN-major from the dSᵀ tile (its columns are dQ's rows), B = K read
  // MN-major from the key tile (rows: keys, columns: head dims).
  static __device__ __forceinline__ void issue(float (&dq)[1][kGradQCols / 8][4],
                                               const u16* ds_tile, const u16* k_tile, int group) {
    const u64 ds_desc = matrix_descriptor(ds_tile, kBlockN * 16, 128);
    const u64 k_desc = matrix_descriptor(k_tile + group * kGradQCols * 8, kDimQK * 16, 128);
#pragma unroll
    for (int ks = 0; ks < kBlockM / 16; ++ks)
      Wgmma<kGradQCols>::template shared_mn_major<E>(flat(dq), ds_desc + ks * 2 * kBlockN,
                                                     k_desc + ks * 2 * kDimQK, ks > 0);
  }

  // Adds this warp's 16 rows of dQ (queries query0 + warp_in_group·16 on)
  // into the fp32 accumulator: two adjacent columns per reduction.
  static __device__ __forceinline__ void add(const AttentionParams& p, int batch, int head,
                                             int query0, int group,
                                             const float (&dq)[1][kGradQCols / 8][4], int warp,
                                             int lane) {
    const int g = lane >> 2, t = lane & 3;
    const int col0 = group * kGradQCols + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int query = query0 + (warp & 3) * 16 + g + 8 * h;
      if (query >= p.seq_q) continue;
      float* row = grad_q_accum_row(p, batch, head, query) + col0;
#pragma unroll
      for (int nt = 0; nt < kGradQCols / 8; ++nt)
        atomic_add_pair(row + nt * 8, dq[0][nt][2 * h], dq[0][nt][2 * h + 1]);
    }
  }

  // The traversed-block loop of one warpgroup (BackwardKeyValueWgmma::
  // traverse's, with dQ): acquire(j) returns once block j is in its stage,
  // release(j) once this warp no longer reads it. Block j's products and dQ
  // run on the tensor cores into block j + 1, whose Sᵀ runs while block j's
  // dQ is added.
  template <class Storage, class Acquire, class Release>
  static __device__ __forceinline__ void traverse(Storage& smem, const AttentionParams& p,
                                                  const typename Steps::Traversal& walk,
                                                  u64 k_desc, u64 v_desc,
                                                  float (&dk)[1][kDimQK / 8][4],
                                                  float (&dv)[1][Steps::kDimV / 8][4],
                                                  int warp_key0, int lane, Acquire acquire,
                                                  Release release) {
    const int warp = threadIdx.x >> 5, group = warp >> 2;
    zero(dk);
    zero(dv);
    float dq[1][kGradQCols / 8][4];
    u32 pt_frag[kBlockN / 16][1][4], dst_frag[kBlockN / 16][1][4];  // block j's A fragments
    for (int j = 0; j < walk.total; ++j) {
      acquire(j);
      const int stage = j % Steps::kStages;
      float st[1][kQueryTiles][4], dpt[1][kQueryTiles][4];
      fence_registers(flat(dk));
      fence_registers(flat(dv));
      fence_registers(flat(dq));
      wgmma_fence();
      Steps::transposed_scores(st, k_desc, smem, stage);
      wgmma_commit();
      if (j > 0) {  // block j - 1's products and dQ are done; Sᵀ(j) may still run
        wgmma_wait<1>();
        fence_registers(flat(dk));
        fence_registers(flat(dv));
        fence_registers(flat(dq));
        release(j - 1);
        add(p, walk.batch, walk.head_of(j - 1), walk.query0_of(j - 1), group, dq, warp, lane);
      }
      wgmma_fence();
      Steps::transposed_score_gradients(dpt, v_desc, smem, stage);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(st));
      fence_registers(flat(dpt));
      Steps::softmax_side(st, dpt, smem, p, walk, j, warp_key0, lane);
      Steps::pack(pt_frag, dst_frag, st, dpt);
      u16* ds_tile = smem.ds[j & 1];
      store_scores_gradient(ds_tile, dst_frag, warp, lane);
      fence_async_shared();  // the stores, to the tensor cores
      wgmma_fence();
      Steps::products(dk, dv, pt_frag, dst_frag, smem, stage);
      named_barrier_sync(kGradQBarrier, C::kWarps * 32);  // every warpgroup's dSᵀ stored
      issue(dq, ds_tile, smem.k, group);
      wgmma_commit();
    }
    if (walk.total > 0) {
      wgmma_wait<0>();
      fence_registers(flat(dk));
      fence_registers(flat(dv));
      fence_registers(flat(dq));
      release(walk.total - 1);
      add(p, walk.batch, walk.head_of(walk.total - 1), walk.query0_of(walk.total - 1), group, dq,
          warp, lane);
    }
  }
};

}  // namespace flashgen_device
