// Copies by the Tensor Memory Accelerator (sm_90): one instruction moves a
// box of a tensor described by a TensorMap (params.cuh) into shared memory
// and reports its bytes to an mbarrier, whose phase completes once the
// expected bytes have landed (and its arrivals are in).
#pragma once

#include "common.cuh"
#include "params.cuh"

namespace flashgen_device {

// Counts this thread's arrival and announces `bytes` more bytes the phase
// waits for (the TMA copies that complete on this barrier).
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(u64* barrier, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   shared_address(barrier)),
               "r"(bytes)
               : "memory");
}

// The box of `map` at coordinates (c0 fastest .. c3) into `destination`
// (16-byte aligned; elements past the tensor's ends are zero), completing
// on `barrier`. `map` is a kernel parameter (__grid_constant__).
__device__ __forceinline__ void tma_load_4d(void* destination, const TensorMap* map, int c0,
                                            int c1, int c2, int c3, u64* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(shared_address(destination)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
      "r"(shared_address(barrier))
      : "memory");
}

}  // namespace flashgen_device
