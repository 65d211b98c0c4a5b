// The wgmma key/value backward with a producer warpgroup: one extra
// warpgroup, whose warps copy the traversed Q and dO tiles (and their rows'
// L2 and Dterm) into kStages stages (all four warps with cp.async, one
// thread with TMA) while the other warpgroups only compute, and which hands
// most of its registers to them (RegisterSplit). The stages and
// their full/empty barriers are a StagePipeline (pipeline/producer_pipeline.cuh): warpgroups
// wait for their data, not for each other, instead of the lockstep of a
// __syncthreads per traversed block in kernels/backward_key_value/wgmma.cuh.
//
// Rows aligned to 4 bytes or more (the copies go straight into the
// core-matrix tiles); everything else is BackwardKeyValueWgmma's. With
// C::kTma (copy=tma; 16-byte aligned rows) the producer's first lane copies
// Q[j] and dO[j] by TMA in slices of 16 columns (into swizzled tiles with
// swizzle=32, else 8), a tensor's whole slices in one copy (tma_load_tile),
// completing on the stage's full barrier, and the tiles have the layout TMA
// writes (TraversedTile).
//
// Rows that are not 16-byte aligned (odd head dims) go by TMA too where the
// heads are adjacent in each token's row and every key/value head has one
// query head (dK accumulates over the group's query heads, whose columns
// would each start elsewhere), as in the forward
// (kernels/forward/wgmma_producer.cuh): token-row views, Q and dO from the
// 32-byte boundary before the head's columns, K and dK shifted as Q, V and
// dV as dO, and the producer warpgroup's second warp zeroes the other
// heads' columns of Q and dO (Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ sum over them)
// before the computing warps read a stage.
#pragma once

#include "kernels/backward_key_value/wgmma.cuh"
#include "pipeline/warp_specialized.cuh"
#include "arch/tma.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// Arrivals on a full barrier of a key/value kernel whose producer warp
// copies Q and dO by TMA: each of its lanes, after its row statistics.
constexpr int kQueryBlockArrivals = ProducerCopies<true>::kThreads;

// The end of the set-up in a key/value kernel whose producer warp copies Q
// and dO by TMA: every thread zeroes its share of the tile columns TMA never
// writes (those past the slices holding kQueryCols, kGradOCols up to the
// tiles' kTileQK, kTileV), then the roles split. True in the computing
// warps, which go on to the mainloop (waiting for query_block_ready); false
// in the producer warpgroup, done.
//
// The producer warp: the traversed Q and dO come by TMA (slices of
// kSliceCols columns; token rows: from the 32-byte boundaries before the
// head's columns, `shifts` before them). For each traversed block j, the
// first lane announces the bytes of Q[j] and dO[j] and issues their TMA
// copies (rows past the sequence end arrive as zeros); while they fly,
// every lane fetches its rows' L2 and Dterm (plain stores) and arrives on
// the stage's full barrier (kQueryBlockArrivals), its arrival releasing its
// own stores. The first lane announces the bytes before it arrives, so the
// phase cannot complete before they are counted. The copies first: the
// fetch's latency (a global load's) would otherwise precede them in every
// block. On token rows (kTokenRows: Storage has FixedStages) the second
// producer warp zeroes the other heads' columns of each stage. Storage: the
// kernel's shared memory (q, grad_o, lse_log2, dterm stages and their
// StagePipeline).
template <int kTileQK, int kTileV, int kQueryCols, int kGradOCols, int kSwizzle, class Roles,
          bool kTokenRows, class Storage, int kBlockN>
__device__ __forceinline__ bool start_query_block_producer(Storage& smem,
                                                           const TraversedTensorMaps& maps,
                                                           const AttentionParams& p,
                                                           const QueryTraversal<kBlockN>& walk,
                                                           int batch, HeadShifts shifts,
                                                           int thread) {
  constexpr int kSliceCols = tma_slice_columns(kSwizzle);
  const int warp = thread >> 5, lane = thread & 31;
  zero_unwritten_columns<kBlockN, kTileQK, kTileV>(
      smem.q, slices_holding<kSliceCols>(shifts.qk, kQueryCols) * kSliceCols, smem.grad_o,
      slices_holding<kSliceCols>(shifts.v, kGradOCols) * kSliceCols, thread,
      Roles::Registers::kThreads);
  if (Roles::split_roles(warp)) {  // K and V are ready after it
    if (Roles::copies(warp))
      smem.pipeline.produce_with_transactions(walk.total, [&](int j, int stage, u64* full) {
        const int head = walk.head_of(j), query0 = walk.query0_of(j);
        if (lane == 0) {
          if constexpr (kTokenRows)
            tma_load_token_row_block<kBlockN, kSliceCols, false>(
                smem.q[stage], smem.grad_o[stage], maps, query0, batch,
                head * kQueryCols - shifts.qk, slices_holding<kSliceCols>(shifts.qk, kQueryCols),
                head * kGradOCols - shifts.v, slices_holding<kSliceCols>(shifts.v, kGradOCols),
                full);
          else
            tma_load_traversed_block<kBlockN, kSliceCols, kQueryCols, kGradOCols, false>(
                smem.q[stage], smem.grad_o[stage], maps, query0, head, batch, full);
        }
        stage_traversed_rows<kBlockN>(p, batch, head, query0, smem.lse_log2[stage],
                                      smem.dterm[stage], lane, 32);
        mbarrier_arrive(full);
      });
    if constexpr (kTokenRows)
      if (Roles::fixes(warp))
        smem.fix_each(smem.pipeline, walk.total, [&](int stage) {
          zero_neighbour_columns<kBlockN, kSliceCols>(smem.q[stage], shifts.qk, kQueryCols, lane,
                                                      32);
          zero_neighbour_columns<kBlockN, kSliceCols>(smem.grad_o[stage], shifts.v, kGradOCols,
                                                      lane, 32);
        });
    return false;
  }
  return true;
}

// A computing warp of such a kernel: returns once traversed block j is in
// its stage with its row statistics (token rows: and fixed).
template <bool kTokenRows, class Storage>
__device__ __forceinline__ void query_block_ready(Storage& smem, int j) {
  smem.pipeline.wait_full(j);
  if constexpr (kTokenRows) smem.fixed.wait_full(j);
}

template <class C>
struct BackwardKeyValueWgmmaProducer {
  typedef BackwardKeyValueWgmma<C> Base;
  static constexpr bool kTokenRows = Base::kTokenRows;
  typedef WarpSpecialized<C::kWarps, C::kTma, kTokenRows ? 32 : 24> Roles;
  typedef typename Roles::Registers Registers;
  typedef typename Roles::Copies Copies;
  static constexpr int kStages = Base::kStages;
  static constexpr int kBlockM = Base::kBlockM, kBlockN = Base::kBlockN;
  static constexpr int kDimQK = Base::kDimQK, kDimV = Base::kDimV;
  static constexpr int kConsumerWarps = C::kWarps;
  static constexpr int kConsumerThreads = C::kWarps * 32;
  static_assert(C::kVec >= 2 || C::kTma, "the producer copies straight into the tiles");

  // Base's tiles, (token rows) the fixed stages' barriers, then a full and
  // an empty barrier per stage.
  struct SharedStorage : Base::Tiles, FixedStages<kTokenRows, kStages> {
    StagePipeline<kStages> pipeline;
  };

  // cp.async copies by the producer warpgroup's four warps.
  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    static_assert(!C::kTma, "copy=tma kernels take the tensor maps");
    run_with(p, nullptr, shared_bytes);
  }

  // TMA copies (maps: Q, then dO) issued by the producer's first lane.
  static __device__ void run(const AttentionParams& p, const TraversedTensorMaps& maps,
                             unsigned char* shared_bytes) {
    static_assert(C::kTma, "only copy=tma kernels take the tensor maps");
    run_with(p, &maps, shared_bytes);
  }

  static __device__ __forceinline__ void run_with(const AttentionParams& p,
                                                  const TraversedTensorMaps* maps,
                                                  unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const CtaTile tile = key_tile<kBlockM, 1, C::kCausal>();
    const int kv_head = tile.head, batch = tile.batch, key0 = tile.row0;
    const typename Base::Traversal walk = Base::traversal_of(p, tile);
    // Token rows: one query head, the kv head's (the host's rule).
    const HeadShifts shifts = head_shifts<C, kTokenRows>(walk.first_head);  // Q's and dO's

    // Every producer thread stores row statistics, every consumer thread reads them.
    if (thread == 0) {
      smem.pipeline.init(kConsumerThreads, Copies::kThreads);
      if constexpr (kTokenRows) smem.fixed.init(1, 32);  // each lane of the fixing warp
    }
    if (warp < kConsumerWarps)
      copy_key_value_rows<C, kBlockM, kConsumerThreads, kDimQK, kDimV, kTokenRows>(
          smem.k, smem.v, p, batch, kv_head, key0, thread, shifts);
    if constexpr (C::kTma) {
      if (!start_query_block_producer<kDimQK, kDimV, C::kDimQK, C::kDimV, C::kSwizzle, Roles,
                                      kTokenRows>(smem, *maps, p, walk, batch, shifts, thread))
        return;
    } else if (Roles::split_roles(warp)) {  // K and V are ready after it
      if (Roles::copies(warp)) produce(smem, p, walk, batch, Roles::producer_thread(thread));
      return;
    }
    const int group = warp / 4;
    const int warp_key0 = key0 + warp * 16;
    const u64 k_desc = matrix_descriptor(smem.k + group * 64 * kDimQK, 128, kDimQK * 16);
    const u64 v_desc = matrix_descriptor(smem.v + group * 64 * kDimV, 128, kDimV * 16);
    float dk[1][kDimQK / 8][4], dv[1][kDimV / 8][4];
    Base::traverse(smem, p, walk, k_desc, v_desc, dk, dv, warp_key0, lane,
                   [&](int j) { query_block_ready<kTokenRows>(smem, j); },
                   [&](int j) { smem.pipeline.release_each(j); });
    Base::store_gradients(p, batch, kv_head, warp_key0, dk, dv, lane, shifts);
  }

  // The copying warps: Q[j], dO[j] (cp.async) and the rows' L2 and Dterm
  // (plain stores, published by the same barrier) into stage j % kStages,
  // each warp its share (producer_thread: 0 to Copies::kThreads - 1),
  // signalling the stage once its copies have landed.
  static __device__ __forceinline__ void produce(SharedStorage& smem, const AttentionParams& p,
                                                 const typename Base::Traversal& walk, int batch,
                                                 int producer_thread) {
    smem.pipeline.produce(walk.total, [&](int j, int stage) {
      const typename Base::BlockRows rows = Base::block_rows(p, walk, j);
      copy_core_matrix_tile<kBlockN, kDimQK, C::kVec, Copies::kThreads>(
          smem.q[stage], rows.q, p.q.stride_seq, p.seq_q - rows.query0, C::kDimQK, producer_thread);
      copy_core_matrix_tile<kBlockN, kDimV, C::kVec, Copies::kThreads>(
          smem.grad_o[stage], rows.grad_o, p.grad_o.stride_seq, p.seq_q - rows.query0, C::kDimV,
          producer_thread);
      Base::stage_row_stats(smem, stage, p, batch, rows.head, rows.query0, producer_thread,
                            Copies::kThreads);
    });
  }
};

}  // namespace flashgen_device
