// The wgmma forward with a producer warp: one extra warpgroup, of which one
// warp copies K and V into kStages stages while the other warpgroups only
// compute. The producer warpgroup hands most of its registers to them
// (setmaxnreg): four warps share each quarter of the register file, so
// without that three computing warpgroups would be held to 128 registers. Stage s has a
// "full" barrier (the producer arrives once K[j] and V[j] have landed) and
// an "empty" one (every consumer warp arrives once it no longer reads
// block j), so warpgroups wait for their data, not for each other: one's
// softmax can run while another's GEMMs do, instead of the lockstep of a
// __syncthreads per key block in forward_wgmma.cuh.
//
// The producer keeps two blocks in flight: it issues block j, waits for
// its own copies of block j-1 (cp.async groups), makes them visible to the
// tensor cores' async proxy and arrives on block j-1's full barrier. Block j
// reuses the stage of block j - kStages, so kStages >= 3 lets block j-1 be
// signalled while the consumers still read block j-2.
//
// Rows aligned to 4 bytes or more (the copies go straight into the
// core-matrix tiles); everything else (shapes, masking, softmax, stores) is
// ForwardWgmma's.
#pragma once

#include "forward_wgmma.cuh"
#include "mbarrier.cuh"

namespace flashgen_device {

template <class C>
struct ForwardWgmmaProducer {
  typedef ForwardWgmma<C> Base;
  static constexpr int kStages = Base::kStages;
  static constexpr int kBlockM = Base::kBlockM, kBlockN = Base::kBlockN;
  static constexpr int kDimQK = Base::kDimQK, kDimV = Base::kDimV;
  static constexpr int kConsumerWarps = C::kWarps;
  static constexpr int kConsumerThreads = C::kWarps * 32;
  // Registers per thread after the hand-over: the producer warpgroup keeps
  // 32 each, the computing warps share the rest of the SM's register file
  // (setmaxnreg takes multiples of 8; 240 leaves ptxas its own headroom).
  static constexpr int kRegisterFile = 65536;  // 32-bit registers per SM (sm_90)
  static constexpr int kProducerThreads = 128;  // one warpgroup
  static constexpr int kProducerRegisters = 32;
  static constexpr int kMostConsumerRegisters = 240;
  static constexpr int kShareOfRest =
      (kRegisterFile - kProducerThreads * kProducerRegisters) / kConsumerThreads / 8 * 8;
  static constexpr int kConsumerRegisters =
      kShareOfRest < kMostConsumerRegisters ? kShareOfRest : kMostConsumerRegisters;
  static_assert(C::kVec >= 2, "the producer copies straight into the tiles");
  static_assert(kStages >= 3, "block j-1 is signalled after block j is issued");

  struct SharedStorage {
    u16 q[kBlockM * kDimQK];
    u16 k[kStages][kBlockN * kDimQK];
    u16 v[kStages][kBlockN * kDimV];
    u64 full[kStages];
    u64 empty[kStages];
  };

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const typename Base::Work w = Base::work_of(p);

    if (thread == 0) {
      for (int s = 0; s < kStages; ++s) {
        mbarrier_init(&smem.full[s], 1);
        mbarrier_init(&smem.empty[s], kConsumerWarps);
      }
    }
    if (warp < kConsumerWarps)
      copy_core_matrix_tile<kBlockM, kDimQK, C::kVec, kConsumerThreads>(
          smem.q, w.q, p.q.stride_seq, p.seq_q - w.row0, C::kDimQK, thread);
    cp_async_commit();
    cp_async_wait<0>();
    fence_async_shared();
    __syncthreads();  // Q and the barriers are ready; no CTA-wide barrier after this

    if (warp >= kConsumerWarps) {
      set_max_registers_dec<kProducerRegisters>();
      if (warp == kConsumerWarps) produce(smem, p, w, lane);
      return;
    }
    set_max_registers_inc<kConsumerRegisters>();
    const int group = warp / 4;
    const int warp_row0 = w.row0 + warp * 16;
    const u64 q_desc = matrix_descriptor(smem.q + group * 64 * kDimQK, 128, kDimQK * 16);
    float o[1][Base::kOutTiles][4];
    OnlineSoftmax<1> softmax;
    Base::attend(
        p, w.n_blocks, q_desc, smem.k, smem.v, o, softmax, warp_row0, lane,
        [&](int n_block) { mbarrier_wait(&smem.full[n_block % kStages], (n_block / kStages) & 1); },
        [&](int n_block) {
          __syncwarp();
          if (lane == 0) mbarrier_arrive(&smem.empty[n_block % kStages]);
        },
        [] {});  // V[n-1] arrived with K[n-1]
    Base::store_outputs(p, w, o, softmax, warp_row0, lane);
  }

  // The producer warp's loop: block j into stage j % kStages once the
  // consumers released block j - kStages; block j-1 signalled full once its
  // copies landed.
  static __device__ __forceinline__ void produce(SharedStorage& smem, const AttentionParams& p,
                                                 const typename Base::Work& w, int lane) {
    for (int n_block = 0; n_block < w.n_blocks; ++n_block) {
      const int stage = n_block % kStages;
      if (n_block >= kStages) mbarrier_wait(&smem.empty[stage], (n_block / kStages + 1) & 1);
      const int key0 = n_block * kBlockN;
      copy_core_matrix_tile<kBlockN, kDimQK, C::kVec, 32>(smem.k[stage],
                                                          w.k + key0 * p.k.stride_seq,
                                                          p.k.stride_seq, p.seq_kv - key0,
                                                          C::kDimQK, lane);
      copy_core_matrix_tile<kBlockN, kDimV, C::kVec, 32>(smem.v[stage],
                                                         w.v + key0 * p.v.stride_seq,
                                                         p.v.stride_seq, p.seq_kv - key0,
                                                         w.value_cols, lane);
      cp_async_commit();
      if (n_block > 0) signal_full(smem, n_block - 1, lane, /*in_flight=*/1);
    }
    if (w.n_blocks > 0) signal_full(smem, w.n_blocks - 1, lane, 0);
  }

  // Waits until at most `in_flight` of this warp's copy groups are pending
  // (block n_block's has landed), makes them visible to the async proxy and
  // arrives on the block's full barrier.
  static __device__ __forceinline__ void signal_full(SharedStorage& smem, int n_block, int lane,
                                                     int in_flight) {
    if (in_flight == 1)
      cp_async_wait<1>();
    else
      cp_async_wait<0>();
    fence_async_shared();
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&smem.full[n_block % kStages]);
  }
};

}  // namespace flashgen_device
