// The wgmma query backward with a producer warpgroup: one extra warpgroup,
// whose warps copy K and V (both kStages stages deep here; all four warps
// with cp.async, one thread with TMA) while the other warpgroups only
// compute, and which hands most of its registers to them (RegisterSplit).
// The stages and their full/empty barriers are a StagePipeline
// (pipeline/producer_pipeline.cuh): warpgroups wait for their data, not for each
// other, instead of the lockstep of a __syncthreads per key block in
// kernels/backward_query/wgmma.cuh.
//
// Rows aligned to 4 bytes or more (the copies go straight into the
// core-matrix tiles); everything else is BackwardQueryWgmma's. With C::kTma
// (copy=tma; 16-byte aligned rows) the producer's first lane issues a TMA
// copy per slice of K[j] and V[j] (16 columns into swizzled tiles with
// swizzle=32, else 8), completing on the stage's full barrier, and the tiles
// have the layout TMA writes (TraversedTile).
//
// Rows that are not 16-byte aligned (odd head dims) go by TMA too where the
// heads are adjacent in each token's row, as in the forward
// (kernels/forward/wgmma_producer.cuh): token-row views, K and V from the
// 32-byte boundary before the head's columns, Q and dQ shifted as K, dO as
// V, and the producer warpgroup's second warp zeroes the other heads'
// columns of both (S = Q·Kᵀ and dP = dO·Vᵀ sum over them) before the
// computing warps read a stage.
#pragma once

#include "kernels/backward_query/wgmma.cuh"
#include "pipeline/warp_specialized.cuh"
#include "arch/tma.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

template <class C>
struct BackwardQueryWgmmaProducer {
  typedef BackwardQueryWgmma<C> Base;
  static constexpr bool kTokenRows = Base::kTokenRows;
  typedef WarpSpecialized<C::kWarps, C::kTma, kTokenRows ? 32 : 24> Roles;
  typedef typename Roles::Registers Registers;
  typedef typename Roles::Copies Copies;
  // K[j] is read until the dQ product of block j (iteration j+1), V[j] by
  // dP(j): one stage holds both, released once both are done.
  static constexpr int kStages = 3;
  static constexpr int kBlockM = Base::kBlockM, kBlockN = Base::kBlockN;
  static constexpr int kDimQK = Base::kDimQK, kDimV = Base::kDimV;
  static constexpr int kConsumerWarps = C::kWarps;
  static constexpr int kConsumerThreads = C::kWarps * 32;
  static_assert(C::kVec >= 2 || C::kTma, "the producer copies straight into the tiles");

  typedef QueryWgmmaTiles<kBlockM, kBlockN, kDimQK, kDimV, kStages, kStages> Tiles;
  // The tiles, (token rows) the fixed stages' barriers, then a full and an
  // empty barrier per stage.
  struct SharedStorage : Tiles, FixedStages<kTokenRows, kStages> {
    StagePipeline<kStages> pipeline;
  };

  // cp.async copies by the producer warpgroup's four warps.
  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    static_assert(!C::kTma, "copy=tma kernels take the tensor maps");
    run_with(p, shared_bytes,
             [&](SharedStorage& smem, int batch, int kv_head, BlockRange blocks, int producer_thread) {
               produce(smem, p, batch, kv_head, blocks, producer_thread);
             });
  }

  // TMA copies (maps: K, then V) issued by the producer's first lane.
  static __device__ void run(const AttentionParams& p, const TraversedTensorMaps& maps,
                             unsigned char* shared_bytes) {
    static_assert(C::kTma, "only copy=tma kernels take the tensor maps");
    run_with(p, shared_bytes,
             [&](SharedStorage& smem, int batch, int kv_head, BlockRange blocks, int producer_thread) {
               produce_with_tma(smem, maps, batch, kv_head, blocks, producer_thread);
             });
  }

  template <class Produce>
  static __device__ __forceinline__ void run_with(const AttentionParams& p,
                                                  unsigned char* shared_bytes, Produce produce) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const CtaTile tile = query_tile<kBlockM, 1, false, C::kCausal>(p);
    const int head = tile.head, kv_head = tile.kv_head, batch = tile.batch, row0 = tile.row0;
    const BlockRange blocks = Base::key_blocks(p, row0, batch, head);
    const HeadShifts shifts = head_shifts<C, kTokenRows>(kv_head);  // K's and V's

    if (thread == 0) {
      smem.pipeline.init(kConsumerWarps, Copies::kFullArrivals);
      if constexpr (kTokenRows) smem.fixed.init(1, 32);  // each lane of the fixing warp
    }
    if (warp < kConsumerWarps) {
      const u16* q = head_slice<const u16>(p.q, batch, head) + row0 * p.q.stride_seq;
      const u16* grad_o = head_slice<const u16>(p.grad_o, batch, head) + row0 * p.grad_o.stride_seq;
      const u16* o = head_slice<const u16>(p.o, batch, head) + row0 * p.o.stride_seq;
      // Token rows: shifted as K and V are.
      copy_head_rows<kBlockM, kDimQK, C::kVec, kConsumerThreads, kTokenRows>(
          smem.q, q, p.q.stride_seq, p.seq_q - row0, C::kDimQK, shifts.qk, thread);
      copy_head_rows<kBlockM, kDimV, C::kVec, kConsumerThreads, kTokenRows>(
          smem.grad_o, grad_o, p.grad_o.stride_seq, p.seq_q - row0, C::kDimV, shifts.v, thread);
      // Dterm and L2 of the CTA's rows while Q and dO stream in.
      stage_query_rows<Base::E, C::kDimV, kBlockM, kConsumerWarps>(
          p, batch, head, row0, grad_o, o, smem.dterm, smem.lse_log2, true, warp, lane);
    }
    if constexpr (C::kTma)
      zero_unwritten_columns<kBlockN, kDimQK, kDimV>(
          smem.k, slices_holding<kSliceCols>(shifts.qk, C::kDimQK) * kSliceCols, smem.v,
          slices_holding<kSliceCols>(shifts.v, C::kDimV) * kSliceCols, thread,
          Registers::kThreads);
    if (Roles::split_roles(warp)) {  // Q, dO and the row stats are ready after it
      if (Roles::copies(warp)) produce(smem, batch, kv_head, blocks, Roles::producer_thread(thread));
      if constexpr (kTokenRows)
        if (Roles::fixes(warp)) fix_stages(smem, shifts, blocks.count(), lane);
      return;
    }
    const int group = warp / 4;
    const int warp_row0 = row0 + warp * 16;
    const u64 q_desc = matrix_descriptor(smem.q + group * 64 * kDimQK, 128, kDimQK * 16);
    const u64 grad_o_desc = matrix_descriptor(smem.grad_o + group * 64 * kDimV, 128, kDimV * 16);
    float dq[1][kDimQK / 8][4];
    Base::traverse(
        p, blocks.count(), blocks.first * kBlockN, score_site<C>(p, batch, head), q_desc,
        grad_o_desc, smem.lse_log2, smem.dterm, dq, warp, warp_row0, lane,
        [&](int j) {
          if constexpr (kTokenRows)
            smem.fixed.wait_full(j);
          else
            smem.pipeline.wait_full(j);
        },
        [&](int j) { smem.pipeline.release(j, lane); },
        [&](int j) -> const u16* { return smem.k[j % kStages]; },
        [&](int j) -> const u16* { return smem.v[j % kStages]; });
    Base::store_grad_q(p, batch, head, warp_row0, dq, lane, shifts.qk);
  }

  // The fixing warp (token rows): the other heads' columns of K[j] and V[j]
  // become zero once block j has landed.
  static __device__ __forceinline__ void fix_stages(SharedStorage& smem, const HeadShifts& shifts,
                                                    int n_blocks, int lane) {
    smem.fix_each(smem.pipeline, n_blocks, [&](int stage) {
      zero_neighbour_columns<kBlockN, kSliceCols>(smem.k[stage], shifts.qk, C::kDimQK, lane, 32);
      zero_neighbour_columns<kBlockN, kSliceCols>(smem.v[stage], shifts.v, C::kDimV, lane, 32);
    });
  }

  // The copying warps: K[j] and V[j] (block j of `blocks`) into stage
  // j % kStages, each warp its
  // share (producer_thread: 0 to Copies::kThreads - 1), signalling the stage
  // once its copies have landed.
  static __device__ __forceinline__ void produce(SharedStorage& smem, const AttentionParams& p,
                                                 int batch, int kv_head, BlockRange blocks,
                                                 int producer_thread) {
    const u16* k = head_slice<const u16>(p.k, batch, kv_head);
    const u16* v = head_slice<const u16>(p.v, batch, kv_head);
    smem.pipeline.produce(blocks.count(), [&](int j, int stage) {
      const int key0 = (blocks.first + j) * kBlockN;
      copy_core_matrix_tile<kBlockN, kDimQK, C::kVec, Copies::kThreads>(
          smem.k[stage], k + key0 * p.k.stride_seq, p.k.stride_seq, p.seq_kv - key0, C::kDimQK,
          producer_thread);
      copy_core_matrix_tile<kBlockN, kDimV, C::kVec, Copies::kThreads>(
          smem.v[stage], v + key0 * p.v.stride_seq, p.v.stride_seq, p.seq_kv - key0, C::kDimV,
          producer_thread);
    });
  }

  // TMA copies slices of kSliceCols columns (8; 16 into swizzled tiles) of
  // the columns that exist (Dqk, Dv); the columns past them, up to the
  // tiles' widths (multiples of 16), are zeroed once in every stage and
  // never written again.
  static constexpr int kSliceCols = tma_slice_columns(C::kSwizzle);

  // The producer warp's first lane: K[j] and V[j] into stage j % kStages,
  // each tensor's whole slices in one TMA copy (tma_load_tile), all
  // completing on the stage's full barrier. Rows past the sequence end
  // arrive as zeros.
  static __device__ __forceinline__ void produce_with_tma(SharedStorage& smem,
                                                          const TraversedTensorMaps& maps,
                                                          int batch, int kv_head,
                                                          BlockRange blocks, int lane) {
    const HeadShifts shifts = head_shifts<C, kTokenRows>(kv_head);
    smem.pipeline.produce_with_transactions(blocks.count(), [&](int j, int stage, u64* full) {
      if (lane != 0) return;
      const int key0 = (blocks.first + j) * kBlockN;
      if constexpr (kTokenRows)  // head kv_head's columns of the token rows, a copy per slice
        tma_load_token_row_block<kBlockN, kSliceCols>(
            smem.k[stage], smem.v[stage], maps, key0, batch, kv_head * C::kDimQK - shifts.qk,
            slices_holding<kSliceCols>(shifts.qk, C::kDimQK), kv_head * C::kDimV - shifts.v,
            slices_holding<kSliceCols>(shifts.v, C::kDimV), full);
      else
        tma_load_traversed_block<kBlockN, kSliceCols, C::kDimQK, C::kDimV>(
            smem.k[stage], smem.v[stage], maps, key0, kv_head, batch, full);
    });
  }
};

}  // namespace flashgen_device
