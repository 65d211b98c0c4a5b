// The three GEMM forms of the wgmma kernels, each a warpgroup's run of
// wgmma k-steps of 16 along the shared dimension, issued and not waited for
// (the caller fences, commits and waits: arch/wgmma.cuh). C is a warp's
// accumulators as flat() lists them; B comes from a descriptor whose k step
// is kBStep descriptor units (TraversedTile::kKMajorStep or kMnMajorStep).
#pragma once

#include "arch/wgmma.cuh"

namespace flashgen_device {

// C = A·Bᵀ over kSteps k-steps, A from a core-matrix tile (a k step of 16
// columns is 256 bytes: 16 descriptor units), B K-major. Overwrites C.
template <int E, int kSteps, int kBStep, int kFloats>
__device__ __forceinline__ void gemm_shared(float (&c)[kFloats], u64 a_desc, u64 b_desc) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
    Wgmma<kFloats * 2>::template shared_shared<E>(c, a_desc + ks * 16, b_desc + ks * kBStep,
                                                  ks > 0);
}

// C = A·Bᵀ with A's k steps held in registers (a[ks]: the m16n8k16 A
// fragments of the warp's 16 rows), B K-major. Overwrites C.
template <int E, int kBStep, int kSteps, int kFloats>
__device__ __forceinline__ void gemm_registers(float (&c)[kFloats], const u32 (&a)[kSteps][4],
                                               u64 b_desc) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
    Wgmma<kFloats * 2>::template registers_k_major<E>(c, a[ks], b_desc + ks * kBStep, ks > 0);
}

// C += A·B with A's k steps in registers (a[ks][0]), B MN-major: the
// products of the kernels (O += P·V, dV += Pᵀ·dO, dK += dSᵀ·Q, dQ += dS·K).
template <int E, int kBStep, int kSteps, int kFloats>
__device__ __forceinline__ void gemm_accumulate(float (&c)[kFloats],
                                                const u32 (&a)[kSteps][1][4], u64 b_desc) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
    Wgmma<kFloats * 2>::template registers_shared<E>(c, a[ks][0], b_desc + ks * kBStep, 1);
}

}  // namespace flashgen_device
