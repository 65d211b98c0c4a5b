// Key/value backward on Hopper's warpgroup MMA (sm_90a), for contiguous rows
// (aligned to 4 bytes or more: copied straight into the tiles; 2-byte aligned:
// the traversed Q and dO staged and shifted into them, K and V shifted in
// registers) and Dqk + Dv <= 256 (dK and dV both stay in registers).
// Same algorithm as kernels/backward_key_value/mma_sync.cuh (deterministic, GQA summed inside
// the CTA); each warpgroup owns 64 key rows:
//
//   Sᵀ  = K·Qᵀ     wgmma, K and Q from shared memory (both K-major)
//   dPᵀ = V·dOᵀ    wgmma, V and dO from shared memory (both K-major)
//   Pᵀ, dSᵀ        registers (exp2_columns, subtract_columns_times)
//   dV += Pᵀ·dO    wgmma, Pᵀ from registers, dO read MN-major
//   dK += dSᵀ·Q    wgmma, dSᵀ from registers, Q read MN-major
//
// The traversed blocks (query blocks of every query head of the group, one
// sequence) have three stages: block j+1 streams in while Sᵀ(j), dPᵀ(j) and
// the dV/dK products of block j−1 run, and the softmax side of block j
// overlaps the dV/dK products on the tensor cores.
#pragma once

#include "common.cuh"
#include "copy/tile_copy.cuh"
#include "epilogue/store.cuh"
#include "softmax/mask.cuh"
#include "softmax/row_stats.cuh"
#include "softmax/softmax.cuh"
#include "arch/warp_gemm.cuh"
#include "arch/wgmma.cuh"
#include "kernels/backward_key_value/query_traversal.cuh"
#include "kernels/backward_key_value/wgmma_steps.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated): kElement, kDimQK, kDimV, kWarps (a multiple of 4), kBlockN,
// kVec (8, 4, 2 or 1), kCausal, kTma (Q and dO tiles in the layout TMA
// writes: kernels/backward_key_value/wgmma_producer.cuh with copy=tma).
template <class C>
struct BackwardKeyValueWgmma : BackwardKeyValueWgmmaSteps<C> {
  typedef BackwardKeyValueWgmmaSteps<C> Steps;
  using Steps::E, Steps::kBlockN, Steps::kDimQK, Steps::kDimV, Steps::kStages;
  using Steps::kQueryTiles, Steps::kTmaLayout;
  using typename Steps::Queries, typename Steps::GradOs, typename Steps::Traversal;
  using Steps::scores, Steps::products, Steps::softmax_side, Steps::pack;
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr int kBlockM = C::kWarps * 16;  // key rows per CTA
  static_assert(C::kWarps % 4 == 0, "whole warpgroups");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256 && kDimQK <= 256 && kDimV <= 256,
                "wgmma n is 16..256");
  static_assert(Steps::kTokenRows || kDimQK + kDimV <= 256, "dK and dV live in registers");

  // Alignment class 1 (rows only 2-byte aligned) without TMA: Q and dO go
  // through staging.
  static constexpr bool kStaged = C::kVec == 1 && !C::kTma;
  typedef TileCopy<kBlockN, kDimQK, 0, 1, kThreads, true> QCopy;
  typedef TileCopy<kBlockN, kDimV, 0, 1, kThreads, true> GradOCopy;

  typedef KeyValueWgmmaTiles<kBlockM * kDimQK, kBlockM * kDimV, kBlockN, kDimQK, kDimV, kStages>
      Tiles;
  typedef WithStaging<Tiles, QCopy, GradOCopy, kStaged> SharedStorage;  // staging (class 1): Q, dO

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const int group = warp / 4;
    const CtaTile tile = key_tile<kBlockM, 1, C::kCausal>();
    const int kv_head = tile.head, batch = tile.batch, key0 = tile.row0;
    const int warp_key0 = key0 + warp * 16;

    if constexpr (kStaged) {  // once per CTA: aligned loads shifted in registers
      const u16* k = head_slice<const u16>(p.k, batch, kv_head) + key0 * p.k.stride_seq;
      const u16* v = head_slice<const u16>(p.v, batch, kv_head) + key0 * p.v.stride_seq;
      load_tile<kBlockM, kDimQK, 0, 1, kThreads, true>(smem.k, k, p.k.stride_seq, p.k.stride_dim,
                                                       p.seq_kv - key0, C::kDimQK, thread);
      load_tile<kBlockM, kDimV, 0, 1, kThreads, true>(smem.v, v, p.v.stride_seq, p.v.stride_dim,
                                                      p.seq_kv - key0, C::kDimV, thread);
    } else {
      copy_key_value_rows<C, kBlockM, kThreads>(smem.k, smem.v, p, batch, kv_head, key0, thread);
    }

    const Traversal walk = traversal_of(p, tile);
    if (walk.total > 0) load_block(smem, 0, p, walk, thread);
    cp_async_commit();

    float dk[1][kDimQK / 8][4], dv[1][kDimV / 8][4];
    // K-major K and V for this warpgroup's 64 keys (the A operands of Sᵀ, dPᵀ).
    const u64 k_desc = matrix_descriptor(smem.k + group * 64 * kDimQK, 128, kDimQK * 16);
    const u64 v_desc = matrix_descriptor(smem.v + group * 64 * kDimV, 128, kDimV * 16);
    traverse(smem, p, walk, k_desc, v_desc, dk, dv, warp_key0, lane,
             [&](int j) { wait_and_load(smem, p, walk, j, thread); },
             [](int) {});
    cp_async_wait<0>();
    store_gradients(p, batch, kv_head, warp_key0, dk, dv, lane);
  }

  // The traversed blocks of the CTA whose keys start at key0 (the query
  // blocks that see its keys).
  static __device__ __forceinline__ Traversal traversal_of(const AttentionParams& p,
                                                          const CtaTile& tile) {
    return Traversal::template of<C>(p, tile, kBlockM);
  }

  // Writes this warp's 16 rows of dV and dK (times the softmax scale); token
  // rows: their columns start at dO's and Q's shifts.
  static __device__ __forceinline__ void store_gradients(const AttentionParams& p, int batch,
                                                         int kv_head, int warp_key0,
                                                         const float (&dk)[1][kDimQK / 8][4],
                                                         const float (&dv)[1][kDimV / 8][4],
                                                         int lane, HeadShifts shifts = {0, 0}) {
    const int valid_keys = p.seq_kv - warp_key0;
    store_rows_times<E, C::kVec>(p.grad_v, batch, kv_head, warp_key0, 0, dv, 1.0f, valid_keys,
                                 C::kDimV, lane, shifts.v);
    store_rows_times<E, C::kVec>(p.grad_k, batch, kv_head, warp_key0, 0, dk, p.scale, valid_keys,
                                 C::kDimQK, lane, shifts.qk);
  }

  // The traversed-block loop of one warpgroup, for any way of filling the
  // stages: acquire(j) returns once block j is in its stage (it may issue
  // further copies), release(j) once this warp no longer reads block j's
  // stage.
  template <class Storage, class Acquire, class Release>
  static __device__ __forceinline__ void traverse(Storage& smem, const AttentionParams& p,
                                                  const Traversal& walk, u64 k_desc, u64 v_desc,
                                                  float (&dk)[1][kDimQK / 8][4],
                                                  float (&dv)[1][kDimV / 8][4], int warp_key0,
                                                  int lane, Acquire acquire, Release release) {
    zero(dk);
    zero(dv);
    u32 pt_frag[kBlockN / 16][1][4], dst_frag[kBlockN / 16][1][4];  // block j-1, A fragments

    // Block j: Sᵀ(j), dPᵀ(j) and the products of block j-1 go to the tensor
    // cores together. Blocks 0 (no products yet) and `total` (products only)
    // are peeled off the loop, so no wgmma sits in a branch.
    if (walk.total > 0) {
      acquire(0);
      float st[1][kQueryTiles][4], dpt[1][kQueryTiles][4];
      wgmma_fence();
      scores(st, dpt, k_desc, v_desc, smem, 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(st));
      fence_registers(flat(dpt));
      softmax_side(st, dpt, smem, p, walk, 0, warp_key0, lane);
      pack(pt_frag, dst_frag, st, dpt);
    }
    for (int j = 1; j < walk.total; ++j) {
      acquire(j);
      float st[1][kQueryTiles][4], dpt[1][kQueryTiles][4];
      fence_registers(flat(dk));
      fence_registers(flat(dv));
      wgmma_fence();
      scores(st, dpt, k_desc, v_desc, smem, j % kStages);
      wgmma_commit();
      products(dk, dv, pt_frag, dst_frag, smem, (j - 1) % kStages);
      wgmma_commit();
      wgmma_wait<1>();  // Sᵀ(j) and dPᵀ(j) are done; the products of j-1 may still run
      fence_registers(flat(st));
      fence_registers(flat(dpt));
      softmax_side(st, dpt, smem, p, walk, j, warp_key0, lane);
      wgmma_wait<0>();  // the A fragments of block j-1 are free
      fence_registers(flat(dk));
      fence_registers(flat(dv));
      release(j - 1);
      pack(pt_frag, dst_frag, st, dpt);
    }
    if (walk.total > 0) {
      fence_registers(flat(dk));
      fence_registers(flat(dv));
      wgmma_fence();
      products(dk, dv, pt_frag, dst_frag, smem, (walk.total - 1) % kStages);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(dk));
      fence_registers(flat(dv));
    }
  }

  // Waits for block j (issued one iteration earlier), then issues block j+1
  // into the stage that block j-2 used (read last by the products of
  // iteration j-1, which every thread has finished at the barrier). Staged:
  // block j is shifted from the staging areas into its stage first, and
  // block j+1 goes to the staging areas.
  static __device__ __forceinline__ void wait_and_load(SharedStorage& smem,
                                                       const AttentionParams& p,
                                                       const Traversal& walk, int j,
                                                       int thread) {
    cp_async_wait<0>();
    if constexpr (kStaged) {
      __syncthreads();  // the staged chunks are visible to every thread
      const BlockRows rows = block_rows(p, walk, j);
      QCopy::finish(smem.q[j % kStages], smem.first_staging(), rows.q, p.q.stride_seq,
                    p.seq_q - rows.query0, C::kDimQK, thread);
      GradOCopy::finish(smem.grad_o[j % kStages], smem.second_staging(), rows.grad_o,
                        p.grad_o.stride_seq, p.seq_q - rows.query0, C::kDimV, thread);
    }
    fence_async_shared();
    __syncthreads();
    if (j + 1 < walk.total) load_block(smem, j + 1, p, walk, thread);
    cp_async_commit();
  }

  // The first Q and dO rows of traversed block j.
  struct BlockRows {
    int head, query0;
    const u16* q;
    const u16* grad_o;
  };
  static __device__ __forceinline__ BlockRows block_rows(const AttentionParams& p,
                                                         const Traversal& walk, int j) {
    BlockRows r;
    r.head = walk.head_of(j);
    r.query0 = walk.query0_of(j);
    r.q = head_slice<const u16>(p.q, walk.batch, r.head) + r.query0 * p.q.stride_seq;
    r.grad_o =
        head_slice<const u16>(p.grad_o, walk.batch, r.head) + r.query0 * p.grad_o.stride_seq;
    return r;
  }

  // Issues the copies of traversed block j (Q, dO) into stage j % kStages
  // (staged: into the staging areas) and stores its rows' L2 and Dterm there.
  static __device__ __forceinline__ void load_block(SharedStorage& smem, int j,
                                                    const AttentionParams& p,
                                                    const Traversal& walk, int thread) {
    const int stage = j % kStages;
    const BlockRows rows = block_rows(p, walk, j);
    const int head = rows.head, query0 = rows.query0;
    if constexpr (kStaged) {
      QCopy::issue(smem.q[stage], smem.first_staging(), rows.q, p.q.stride_seq, p.q.stride_dim,
                   p.seq_q - query0, C::kDimQK, thread);
      GradOCopy::issue(smem.grad_o[stage], smem.second_staging(), rows.grad_o,
                       p.grad_o.stride_seq, p.grad_o.stride_dim, p.seq_q - query0, C::kDimV,
                       thread);
    } else {
      copy_core_matrix_tile<kBlockN, kDimQK, C::kVec, kThreads>(
          smem.q[stage], rows.q, p.q.stride_seq, p.seq_q - query0, C::kDimQK, thread);
      copy_core_matrix_tile<kBlockN, kDimV, C::kVec, kThreads>(
          smem.grad_o[stage], rows.grad_o, p.grad_o.stride_seq, p.seq_q - query0, C::kDimV,
          thread);
    }
    stage_row_stats(smem, stage, p, walk.batch, head, query0, thread, kThreads);
  }

  // L2 and Dterm of the block's query rows into `stage` (`threads` threads
  // from `thread` on share the rows).
  template <class Storage>
  static __device__ __forceinline__ void stage_row_stats(Storage& smem, int stage,
                                                         const AttentionParams& p, int batch,
                                                         int head, int query0, int thread,
                                                         int threads) {
    stage_traversed_rows<kBlockN>(p, batch, head, query0, smem.lse_log2[stage],
                                  smem.dterm[stage], thread, threads);
  }
};

}  // namespace flashgen_device
