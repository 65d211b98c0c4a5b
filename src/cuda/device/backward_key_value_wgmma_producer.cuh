// The wgmma key/value backward with a producer warp: one extra warpgroup, of
// which one warp copies the traversed Q and dO tiles (and their rows' L2 and
// Dterm) into kStages stages while the other warpgroups only compute, and
// which hands most of its registers to them (RegisterSplit). The stages and
// their full/empty barriers are a StagePipeline (producer_pipeline.cuh): warpgroups
// wait for their data, not for each other, instead of the lockstep of a
// __syncthreads per traversed block in backward_key_value_wgmma.cuh.
//
// Rows aligned to 4 bytes or more (the copies go straight into the
// core-matrix tiles); everything else is BackwardKeyValueWgmma's.
#pragma once

#include "backward_key_value_wgmma.cuh"
#include "producer_pipeline.cuh"

namespace flashgen_device {

template <class C>
struct BackwardKeyValueWgmmaProducer {
  typedef BackwardKeyValueWgmma<C> Base;
  typedef RegisterSplit<C::kWarps> Registers;
  static constexpr int kStages = Base::kStages;
  static constexpr int kBlockM = Base::kBlockM, kBlockN = Base::kBlockN;
  static constexpr int kDimQK = Base::kDimQK, kDimV = Base::kDimV;
  static constexpr int kConsumerWarps = C::kWarps;
  static constexpr int kConsumerThreads = C::kWarps * 32;
  static_assert(C::kVec >= 2, "the producer copies straight into the tiles");

  // Base's tiles, then a full and an empty barrier per stage.
  struct SharedStorage : Base::Tiles {
    StagePipeline<kStages> pipeline;
  };

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const int kv_head = blockIdx.y;
    const int batch = blockIdx.z;
    const int key0 = blockIdx.x * kBlockM;
    const typename Base::Traversal walk = Base::traversal_of(p, key0);

    if (thread == 0) smem.pipeline.init(kConsumerWarps);
    if (warp < kConsumerWarps) {
      const u16* k = static_cast<const u16*>(p.k.data) + batch * p.k.stride_batch +
                     kv_head * p.k.stride_heads + key0 * p.k.stride_seq;
      const u16* v = static_cast<const u16*>(p.v.data) + batch * p.v.stride_batch +
                     kv_head * p.v.stride_heads + key0 * p.v.stride_seq;
      copy_core_matrix_tile<kBlockM, kDimQK, C::kVec, kConsumerThreads>(
          smem.k, k, p.k.stride_seq, p.seq_kv - key0, C::kDimQK, thread);
      copy_core_matrix_tile<kBlockM, kDimV, C::kVec, kConsumerThreads>(
          smem.v, v, p.v.stride_seq, p.seq_kv - key0, C::kDimV, thread);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_async_shared();
    __syncthreads();  // K, V and the barriers are ready; no CTA-wide barrier after this

    if (Registers::is_producer(warp)) {
      // Its first warp copies; the other three idle.
      if (warp == kConsumerWarps) produce(smem, p, walk, batch, kv_head, lane);
      return;
    }
    const int group = warp / 4;
    const int warp_key0 = key0 + warp * 16;
    const u64 k_desc = matrix_descriptor(smem.k + group * 64 * kDimQK, 128, kDimQK * 16);
    const u64 v_desc = matrix_descriptor(smem.v + group * 64 * kDimV, 128, kDimV * 16);
    float dk[1][kDimQK / 8][4], dv[1][kDimV / 8][4];
    Base::traverse(smem, p, walk, k_desc, v_desc, dk, dv, warp_key0, lane,
                   [&](int j) { smem.pipeline.wait_full(j); },
                   [&](int j) { smem.pipeline.release(j, lane); });
    Base::store_gradients(p, batch, kv_head, warp_key0, dk, dv, lane);
  }

  // The producer warp: Q[j], dO[j] (cp.async) and the rows' L2 and Dterm
  // (plain stores, published by the same barrier) into stage j % kStages.
  static __device__ __forceinline__ void produce(SharedStorage& smem, const AttentionParams& p,
                                                 const typename Base::Traversal& walk, int batch,
                                                 int kv_head, int lane) {
    smem.pipeline.produce(walk.total, lane, [&](int j, int stage) {
      const typename Base::BlockRows rows = Base::block_rows(p, walk, j, batch, kv_head);
      copy_core_matrix_tile<kBlockN, kDimQK, C::kVec, 32>(smem.q[stage], rows.q, p.q.stride_seq,
                                                          p.seq_q - rows.query0, C::kDimQK, lane);
      copy_core_matrix_tile<kBlockN, kDimV, C::kVec, 32>(smem.grad_o[stage], rows.grad_o,
                                                         p.grad_o.stride_seq,
                                                         p.seq_q - rows.query0, C::kDimV, lane);
      Base::stage_row_stats(smem, stage, p, batch, rows.head, rows.query0, lane, 32);
    });
  }
};

}  // namespace flashgen_device
