// The wgmma query backward for heads too wide for dQ in one warpgroup's
// registers (Dqk past 256; split=dims): a CTA of two computing warpgroups
// owns 64 query rows, and the warpgroups split the head dims instead of the
// rows, so no GEMM is computed twice:
//
//   S_g = Q[:, half g]·K[:, half g]ᵀ,  dP_g = dO[:, half g]·V[:, half g]ᵀ
//                                      wgmma, each warpgroup its halves
//   S = S_0 + S_1, dP = dP_0 + dP_1    through shared memory; each warpgroup
//   P, dS                              finishes one of the two rows each of
//                                      its threads holds and hands its dS
//                                      fragments to the other
//   dQ[:, half g] += dS·K[:, half g]   wgmma, each warpgroup its half
//
// The alternative, CTAs that each own a column chunk of dQ, computes S and
// dP once per chunk (1.67x the tensor work at D = 384 and 512). Q, dO, K
// and V are zero-filled to a multiple of 32 columns, so both warpgroups run
// the same instructions. A producer warpgroup copies K and V by TMA into
// pipelines of their own: V[j] is read by dP(j) only, K[j] until the dQ
// product of block j, one block later (three stages of K, two of V by
// default). Deterministic: no atomics, a fixed order.
//
// Operands kept in registers (cache=Q, cache=dO): each warpgroup may hold
// its half of Q (dO) as the A fragments of S (dP), read once from global
// memory (Dqk / 4, Dv / 4 registers a thread beside half of dQ), so those
// GEMMs read only the key (value) tile from shared memory, and the held
// tile leaves shared memory (as the key/value kernel's cache=K / cache=V).
//
// Rows that are not 16-byte aligned (odd head dims) go by TMA too where the
// heads are adjacent in each token's row, as in kernels/backward_query/
// wgmma_producer.cuh: K and V through token-row views from the 32-byte
// boundary before the key/value head's columns, Q and dQ shifted as K, dO
// as V, and the producer warpgroup's second warp zeroes the other heads'
// columns of each K and V stage before the computing warps read it.
#pragma once

#include "kernels/backward_query/wgmma.cuh"
#include "pipeline/warp_specialized.cuh"
#include "arch/tma.cuh"
#include "layout/shared_memory.cuh"
#include "pipeline/warpgroup_exchange.cuh"
#include "kernels/backward_query/wgmma_split_steps.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated): kElement, kDimQK, kDimV, kWarps (8: two computing
// warpgroups), kBlockN, kVec (8; 4, 2 or 1: token rows), kCausal, kTma
// (true), kSwizzle, kKeyStages, kValueStages, kCacheQ and kCacheGradO (Q,
// dO in registers).
template <class C>
struct BackwardQueryWgmmaSplit : BackwardQueryWgmmaSplitSteps<C> {
  typedef BackwardQueryWgmmaSplitSteps<C> Steps;
  using Steps::E, Steps::kBlockM, Steps::kBlockN, Steps::kDimQK, Steps::kDimV, Steps::kHalfQK;
  using Steps::kHalfV, Steps::kKeyStages, Steps::kValueStages, Steps::kKeyTiles;
  using Steps::kConsumerWarps, Steps::kGroupThreads, Steps::kBothGroups;
  using Steps::kQueriesInRegisters, Steps::kGradOsInRegisters, Steps::kQueryTileElements;
  using Steps::kGradOTileElements, Steps::kPartialFloats, Steps::kGradWords;
  using Steps::kPartialsBarrier, Steps::kGradScoresBarrier;
  using Steps::kSliceCols, Steps::kTokenRows;
  using typename Steps::Roles, typename Steps::Registers, typename Steps::Keys;
  using typename Steps::Values, typename Steps::SharedStorage;
  using Steps::half_scores, Steps::half_contraction, Steps::half_product;

  // BackwardQueryWgmma over one warpgroup's half of the head dims: its
  // masking, P and dS, fragment packing and stores.
  // (Its tiles are this kernel's, so it reads them as 16-byte rows.)
  struct HalfConfig : C {
    static constexpr int kDimQK = BackwardQueryWgmmaSplit::kHalfQK;
    static constexpr int kDimV = BackwardQueryWgmmaSplit::kHalfV;
    static constexpr int kVec = 8;
  };
  typedef BackwardQueryWgmma<HalfConfig> Half;

  static __device__ void run(const AttentionParams& p, const TraversedTensorMaps& maps,
                             unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const CtaTile tile = query_tile<kBlockM, 1, false, C::kCausal>(p);
    const int head = tile.head, kv_head = tile.kv_head, batch = tile.batch, row0 = tile.row0;
    const BlockRange blocks = key_blocks_for_rows<C, kBlockN>(p, row0, kBlockM, batch, head);
    const HeadShifts shifts = head_shifts<C, kTokenRows>(kv_head);  // K's and V's

    if (thread == 0) {
      smem.keys.init(kConsumerWarps);
      smem.values.init(kConsumerWarps);
      if constexpr (kTokenRows) smem.fixed.init(1, 32);  // each lane of the fixing warp
    }
    if (warp < kConsumerWarps) {
      const u16* q = head_slice<const u16>(p.q, batch, head) + row0 * p.q.stride_seq;
      const u16* grad_o = head_slice<const u16>(p.grad_o, batch, head) + row0 * p.grad_o.stride_seq;
      const u16* o = head_slice<const u16>(p.o, batch, head) + row0 * p.o.stride_seq;
      // Token rows: shifted as K and V are.
      if (!kQueriesInRegisters)
        copy_head_rows<kBlockM, kDimQK, C::kVec, kBothGroups, kTokenRows>(
            smem.q, q, p.q.stride_seq, p.seq_q - row0, C::kDimQK, shifts.qk, thread);
      if (!kGradOsInRegisters)
        copy_head_rows<kBlockM, kDimV, C::kVec, kBothGroups, kTokenRows>(
            smem.grad_o, grad_o, p.grad_o.stride_seq, p.seq_q - row0, C::kDimV, shifts.v,
            thread);
      // Dterm and L2 of the CTA's rows while Q and dO stream in.
      stage_query_rows<E, C::kDimV, kBlockM, kConsumerWarps>(
          p, batch, head, row0, grad_o, o, smem.dterm, smem.lse_log2, true, warp, lane);
    }
    zero_columns_from<kBlockN, kDimQK>(
        smem.k, slices_holding<kSliceCols>(shifts.qk, C::kDimQK) * kSliceCols, thread,
        Registers::kThreads);
    zero_columns_from<kBlockN, kDimV>(
        smem.v, slices_holding<kSliceCols>(shifts.v, C::kDimV) * kSliceCols, thread,
        Registers::kThreads);
    if (Roles::split_roles(warp)) {  // Q, dO and the row stats are ready after it
      if (Roles::copies(warp) && Roles::producer_thread(thread) == 0)
        produce(smem, maps, batch, kv_head, blocks, shifts);
      if constexpr (kTokenRows)
        if (Roles::fixes(warp)) fix_stages(smem, shifts, blocks.count(), lane);
      return;
    }
    // The warpgroup, broadcast so that the compiler sees a warp-uniform
    // value: the branches on it hold wgmma instructions.
    const int group = __shfl_sync(0xffffffffu, warp / 4, 0);
    const int group_thread = thread & (kGroupThreads - 1);
    const int warp_row0 = row0 + (warp & 3) * 16;  // both warpgroups cover the same rows
    float dq[1][kHalfQK / 8][4];
    traverse(smem, p, blocks, dq, batch, head, shifts, group, group_thread, warp & 3, warp_row0,
             lane);
    store_tile_columns_times<E, C::kVec>(p.grad_q, batch, head, warp_row0, group * kHalfQK, dq,
                                         p.scale, p.seq_q - warp_row0, C::kDimQK, lane, shifts.qk);
  }

  // The producer warp's first lane: K[j] and V[j] (block j of `blocks`) into
  // their pipelines, each tensor's whole slices in one TMA copy (token rows:
  // a copy per slice of the key/value head's columns); rows past the
  // sequence end arrive as zeros.
  static __device__ __forceinline__ void produce(SharedStorage& smem,
                                                 const TraversedTensorMaps& maps, int batch,
                                                 int kv_head, BlockRange blocks,
                                                 const HeadShifts& shifts) {
    for (int j = 0; j < blocks.count(); ++j) {
      const int key0 = (blocks.first + j) * kBlockN;
      smem.keys.wait_empty(j);
      tma_load_announced_head_tile<kBlockN, kSliceCols, C::kDimQK, kTokenRows, false>(
          smem.k[j % kKeyStages], maps, key0, kv_head, batch, shifts.qk,
          smem.keys.full_barrier(j));
      smem.values.wait_empty(j);
      tma_load_announced_head_tile<kBlockN, kSliceCols, C::kDimV, kTokenRows, true>(
          smem.v[j % kValueStages], maps, key0, kv_head, batch, shifts.v,
          smem.values.full_barrier(j));
    }
  }

  // The fixing warp (token rows): the other heads' columns of K[j] and V[j]
  // become zero once both have landed.
  static __device__ __forceinline__ void fix_stages(SharedStorage& smem, const HeadShifts& shifts,
                                                    int n_blocks, int lane) {
    smem.fix_each_block(n_blocks, [&](int j) {
      smem.keys.wait_full(j);
      smem.values.wait_full(j);
      zero_neighbour_columns<kBlockN, kSliceCols>(smem.k[j % kKeyStages], shifts.qk, C::kDimQK,
                                                  lane, 32);
      zero_neighbour_columns<kBlockN, kSliceCols>(smem.v[j % kValueStages], shifts.v, C::kDimV,
                                                  lane, 32);
    });
  }

  // A computing warp: returns once K[j] and V[j] are in their stages (token
  // rows: and fixed).
  static __device__ __forceinline__ void block_ready(SharedStorage& smem, int j) {
    if constexpr (kTokenRows) {
      smem.fixed.wait_full(j);
    } else {
      smem.keys.wait_full(j);
      smem.values.wait_full(j);
    }
  }

  // One warpgroup's key-block loop: S_g(j) and dP_g(j) go to the tensor
  // cores beside dQ_g += dS(j-1)·K[j-1]; the exchanges and the dS side of
  // block j run while the product does. Blocks 0 and n are peeled off, so
  // no wgmma sits in a branch.
  static __device__ __forceinline__ void traverse(SharedStorage& smem, const AttentionParams& p,
                                                  BlockRange blocks, float (&dq)[1][kHalfQK / 8][4],
                                                  int batch, int head, const HeadShifts& shifts,
                                                  int group, int group_thread, int warp_in_group,
                                                  int warp_row0, int lane) {
    // This warpgroup's half of the contraction: columns g·kHalfQK on of Q
    // and K (of dQ too), g·kHalfV on of dO and V.
    const u64 q_desc = matrix_descriptor(smem.q + 8 * group * kHalfQK, 128, kDimQK * 16);
    const u64 grad_o_desc = matrix_descriptor(smem.grad_o + 8 * group * kHalfV, 128, kDimV * 16);
    const int key_half = group * (kHalfQK / 16) * Keys::kKMajorStep;
    const int value_half = group * (kHalfV / 16) * Values::kKMajorStep;
    // Held operands: this warp's 16 rows of the warpgroup's half (unused, no
    // registers, unless held).
    u32 q_frag[kHalfQK / 16][4], grad_o_frag[kHalfV / 16][4];
    if constexpr (kQueriesInRegisters)
      load_a_fragments_global<kHalfQK / 16, C::kVec>(q_frag, p.q, batch, head, warp_row0, p.seq_q,
                                                     group * kHalfQK, C::kDimQK, lane, shifts.qk);
    if constexpr (kGradOsInRegisters)
      load_a_fragments_global<kHalfV / 16, C::kVec>(grad_o_frag, p.grad_o, batch, head,
                                                    warp_row0, p.seq_q, group * kHalfV, C::kDimV,
                                                    lane, shifts.v);
    float l2_of_row[1][2], dterm_of_row[1][2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp_in_group * 16 + (lane >> 2) + 8 * h;
      l2_of_row[0][h] = smem.lse_log2[r];
      dterm_of_row[0][h] = smem.dterm[r];
    }
    zero(dq);
    u32 ds_frag[kBlockN / 16][1][4];  // dS of block j-1 as A fragments
    const int n_blocks = blocks.count(), first_key = blocks.first * kBlockN;
    const ScoreSite site = score_site<C>(p, batch, head);

    if (n_blocks > 0) {
      block_ready(smem, 0);
      float s[1][kKeyTiles][4], dp[1][kKeyTiles][4];
      wgmma_fence();
      half_scores(s, dp, q_desc, grad_o_desc, q_frag, grad_o_frag, smem.k[0], smem.v[0], key_half,
                  value_half);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(s));
      fence_registers(flat(dp));
      smem.values.release(0, lane);
      finish_block(smem, s, dp, ds_frag, l2_of_row, dterm_of_row, p, first_key, group,
                   group_thread, warp_row0, lane, site);
    }
    for (int n_block = 1; n_block < n_blocks; ++n_block) {
      block_ready(smem, n_block);
      float s[1][kKeyTiles][4], dp[1][kKeyTiles][4];
      fence_registers(flat(dq));
      wgmma_fence();
      half_scores(s, dp, q_desc, grad_o_desc, q_frag, grad_o_frag, smem.k[n_block % kKeyStages],
                  smem.v[n_block % kValueStages], key_half, value_half);
      wgmma_commit();
      half_product(dq, ds_frag, smem.k[(n_block - 1) % kKeyStages], key_half);
      wgmma_commit();
      wgmma_wait<1>();  // S_g(j) and dP_g(j) are done; the product may still run
      fence_registers(flat(s));
      fence_registers(flat(dp));
      smem.values.release(n_block, lane);
      sum_partials(smem.partial, kPartialsBarrier, group, group_thread, s, dp);
      Half::query_side(s, dp, l2_of_row, dterm_of_row, p, first_key + n_block * kBlockN,
                       warp_row0, lane, site);
      wgmma_wait<0>();  // the dS fragments of block j-1 are free
      fence_registers(flat(dq));
      smem.keys.release(n_block - 1, lane);
      Half::pack(ds_frag, dp);
      exchange_words(smem.grad_scores, kGradScoresBarrier, group, group_thread, ds_frag);
    }
    if (n_blocks > 0) {
      fence_registers(flat(dq));
      wgmma_fence();
      half_product(dq, ds_frag, smem.k[(n_blocks - 1) % kKeyStages], key_half);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(dq));
      smem.keys.release(n_blocks - 1, lane);
    }
  }

  // Block 0's side (no product runs beside it).
  static __device__ __forceinline__ void finish_block(
      SharedStorage& smem, float (&s)[1][kKeyTiles][4], float (&dp)[1][kKeyTiles][4],
      u32 (&ds_frag)[kBlockN / 16][1][4], const float (&l2_of_row)[1][2],
      const float (&dterm_of_row)[1][2], const AttentionParams& p, int key0, int group,
      int group_thread, int warp_row0, int lane, const ScoreSite& site) {
    sum_partials(smem.partial, kPartialsBarrier, group, group_thread, s, dp);
    Half::query_side(s, dp, l2_of_row, dterm_of_row, p, key0, warp_row0, lane, site);
    Half::pack(ds_frag, dp);
    exchange_words(smem.grad_scores, kGradScoresBarrier, group, group_thread, ds_frag);
  }
};

}  // namespace flashgen_device
