// The skeleton every wgmma kernel with a producer warpgroup shares (the
// three _producer kernels, the split=outputs and both split=dims kernels):
//
//   set-up     (kernel)   thread 0 initialises the StagePipelines; the
//                         computing warps copy the tiles they keep (Q and
//                         dO, or K and V); every thread zeroes the columns
//                         TMA never writes
//   hand-over  (here)     wait for those copies, the CTA's last
//                         __syncthreads, the register split (RegisterSplit)
//   producer   (Produce)  fills the stages of the traversed tiles
//   consumers  (kernel)   the mainloop over the stages, then the epilogue
//
// so a change to how the roles meet (a persistent tile loop, another copy
// engine) is made here once.
#pragma once

#include "common.cuh"
#include "pipeline/producer_pipeline.cuh"

namespace flashgen_device {

// kConsumerWarps computing warps (warps 0 on) and one producer warpgroup
// after them, whose copies are TMA (kTma: its first thread issues them) or
// cp.async (all four warps); kProducerFloor: RegisterSplit's.
template <int kConsumerWarps, bool kTma, int kProducerFloor = 24>
struct WarpSpecialized {
  typedef RegisterSplit<kConsumerWarps, kProducerFloor> Registers;
  typedef ProducerCopies<kTma> Copies;
  static constexpr int kConsumerThreads = kConsumerWarps * 32;

  // Every thread, after its share of the set-up: waits for its copies,
  // makes them visible to the tensor cores and meets the others at the
  // CTA's last barrier, then splits the registers. True for the producer
  // warpgroup, which copies (copies(), producer_thread()) and returns;
  // the computing warps go on to the mainloop and the epilogue.
  static __device__ __forceinline__ bool split_roles(int warp) {
    cp_async_commit();
    cp_async_wait<0>();
    fence_async_shared();
    __syncthreads();  // the kept tiles and the barriers are ready; no CTA-wide barrier after this
    return Registers::is_producer(warp);
  }

  // Whether a producer warp copies: with TMA only the first (its first lane
  // issues every copy), with cp.async all four.
  static __device__ __forceinline__ bool copies(int warp) {
    return !kTma || warp == kConsumerWarps;
  }
  // With TMA on token rows (FixedStages), the producer warpgroup's second
  // warp zeroes the other heads' columns of each stage once it has landed.
  static __device__ __forceinline__ bool fixes(int warp) {
    return kTma && warp == kConsumerWarps + 1;
  }
  // A copying thread's place among Copies::kThreads (TMA: its lane).
  static __device__ __forceinline__ int producer_thread(int thread) {
    return kTma ? thread & 31 : thread - kConsumerThreads;
  }
};

}  // namespace flashgen_device
