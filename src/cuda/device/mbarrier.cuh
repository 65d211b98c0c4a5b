// Shared-memory barriers (mbarrier, sm_90) and register hand-over
// (setmaxnreg, sm_90a) for pipelines whose producer and consumers are
// different warps: a consumer waits for the phase of a stage's
// "full" barrier, the producer for the phase of its "empty" barrier, and no
// warp waits for the whole CTA.
#pragma once

#include "common.cuh"

namespace flashgen_device {

// One thread initialises; a __syncthreads() must follow before any use.
__device__ __forceinline__ void mbarrier_init(u64* barrier, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)),
               "r"(arrivals)
               : "memory");
}

// Counts one arrival (release: the caller's earlier shared-memory writes are
// visible to a thread whose wait observes the phase completing).
__device__ __forceinline__ void mbarrier_arrive(u64* barrier) {
  asm volatile(
      "{\n"
      "  .reg .b64 state;\n"
      "  mbarrier.arrive.shared::cta.b64 state, [%0];\n"
      "}\n" ::"r"(shared_address(barrier))
      : "memory");
}

// Returns once the phase with this parity (0 for the first, then 1, 0, ...)
// has completed (acquire).
__device__ __forceinline__ void mbarrier_wait(u64* barrier, u32 parity) {
  asm volatile(
      "{\n"
      "  .reg .pred done;\n"
      "waiting:\n"
      "  mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "  @!done bra waiting;\n"
      "}\n" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
}

// Warpgroup-wide: lowers (dec) or raises (inc) the registers each thread of
// the calling warpgroup holds, so warpgroups with different roles can split
// the register file unevenly (sm_90a).
template <int kRegisters>
__device__ __forceinline__ void set_max_registers_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void set_max_registers_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}

}  // namespace flashgen_device
