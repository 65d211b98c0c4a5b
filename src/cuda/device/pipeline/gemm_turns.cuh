// The order in which a CTA's computing warpgroups issue their GEMMs
// (pingpong=1, the wgmma forward with a producer): in turns, each
// warpgroup issuing a key block's GEMMs once the warpgroup before it has
// issued its own. The tensor cores then run one warpgroup's GEMMs while
// the next one computes its softmax, instead of the warpgroups issuing at
// the same moment and all waiting on the tensor cores at once, then all
// leaving them idle for their softmax.
//
// Named barriers kFirstBarrier + g: warpgroup g waits on its own (its 128
// threads and the 128 of warpgroup g − 1 arriving) before it issues, and
// arrives on g + 1's after. Every warpgroup of a CTA traverses the same
// blocks, so each takes as many turns as the others. open() lets the first
// warpgroup take its first turn; the last warpgroup's last arrival is left
// over at the end of the kernel (a persistent walk's tiles keep turning).
// The computing warpgroups are the CTA's first; each call finds its own
// from threadIdx (a special register, reread rather than held across the
// loops that call it: a register held there made a key/value kernel spill).
#pragma once

#include "common.cuh"
#include "pipeline/producer_pipeline.cuh"

namespace flashgen_device {

template <int kGroups, bool kTakeTurns>
struct GemmTurns {
  static_assert(!kTakeTurns || kGroups >= 2, "turns between two warpgroups or more");
  // Barriers 1 + g are the persistent walk's Q tiles (kernels/forward/wgmma_producer.cuh).
  static constexpr int kFirstBarrier = 4;
  static constexpr int kThreads = 2 * 128;

  static __device__ __forceinline__ void open() {
    if constexpr (kTakeTurns)
      if (group() == kGroups - 1) named_barrier_arrive(kFirstBarrier, kThreads);
  }
  static __device__ __forceinline__ void take() {
    if constexpr (kTakeTurns) named_barrier_sync(kFirstBarrier + group(), kThreads);
  }
  static __device__ __forceinline__ void pass() {
    if constexpr (kTakeTurns)
      named_barrier_arrive(kFirstBarrier + (group() + 1) % kGroups, kThreads);
  }

 private:
  static __device__ __forceinline__ int group() { return threadIdx.x / 128; }
};

}  // namespace flashgen_device
