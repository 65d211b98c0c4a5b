// Throughput of Hopper's warpgroup MMA by shared-memory operand layout and
// instruction width, apart from any attention kernel: how fast can the
// tensor cores consume tiles in the no-swizzle core-matrix layout the
// kernels use, against the 128-byte swizzle, for the GEMM shapes of the
// forward (S = Q·Kᵀ: both operands from shared memory, n = key block;
// O += P·V: A from registers, B MN-major, n = value columns).
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I src/cuda/device bench/micro/wgmma_layouts.cu -o wgmma_layouts
//   ./wgmma_layouts
//
// Every CTA (one per SM) runs W warpgroups, each issuing the same chain of
// k16 steps over a 256-deep K from its own A tile and a B tile all share
// (like K in the forward), one commit group per chain. Contents
// are random bits: the rate, not the product, is measured.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "arch/wgmma_ops.cuh"  // src/cuda/device on the include path

using namespace flashgen_device;

namespace {

enum Layout { kNoSwizzle = 0, kSwizzle128 = 1 };

constexpr int kDepth = 256;  // K of every chain (16 steps of k16)

__device__ __forceinline__ u32 smem_address(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// A descriptor: start, leading and stride byte offsets, layout type.
__device__ __forceinline__ u64 descriptor(const void* tile, u32 leading, u32 stride, int layout) {
  const u64 start = (smem_address(tile) & 0x3FFFF) >> 4;
  return start | (u64((leading >> 4) & 0x3FFF) << 16) | (u64((stride >> 4) & 0x3FFF) << 32) |
         (u64(layout) << 62);
}

// K-major operand of `rows` rows and kDepth columns.
// No swizzle: core matrices 128 bytes apart along K, kDepth·16 along rows; a k16 step is 256 bytes.
// 128-byte swizzle: 64-column panels of rows·128 bytes; 8-row atoms 1024 apart; a k16 step is
// 32 bytes inside a panel.
__device__ __forceinline__ u64 k_major(const void* tile, int rows, int layout, int ks) {
  if (layout == kNoSwizzle) return descriptor(tile, 128, kDepth * 16, 0) + ks * 16;
  const int panel = ks / 4, step = ks % 4;
  return descriptor(static_cast<const char*>(tile) + panel * rows * 128, 16, 1024, 1) + step * 2;
}

// MN-major B (V in O = P·V) of kDepth rows (K) and n columns.
// No swizzle: core matrices n·16 bytes apart along K, 128 along N; a k16 step is n·32 bytes.
// 128-byte swizzle: 64-column panels of kDepth·128 bytes; 8-row atoms of 1024 bytes along K,
// a k16 step is 2048 bytes.
__device__ __forceinline__ u64 mn_major(const void* tile, int n, int layout, int ks) {
  if (layout == kNoSwizzle) return descriptor(tile, n * 16, 128, 0) + ks * n * 2;
  return descriptor(tile, kDepth * 128, 1024, 1) + ks * 128;
}

template <int N, bool kRegistersA>
__global__ void __launch_bounds__(384, 1)
    chain(int iterations, int layout, float* sink, long long* cycles) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int group = threadIdx.x / 128, warpgroups = blockDim.x / 128;
  // [warpgroup A tiles: 64 x kDepth each][B: N x kDepth]
  unsigned char* a_tiles = smem;
  unsigned char* b_tile = smem + warpgroups * 64 * kDepth * 2;
  const int bytes = warpgroups * 64 * kDepth * 2 + N * kDepth * 2;
  for (int i = threadIdx.x * 4; i < bytes; i += blockDim.x * 4)
    *reinterpret_cast<u32*>(smem + i) = (i * 2654435761u) & 0x3F7F3F7Fu;  // finite values
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  u32 a_regs[4] = {0x3F803F80u ^ threadIdx.x, 0x3F003F00u, 0x3E803E80u, 0x3F403F40u};
  const unsigned char* a = a_tiles + group * 64 * kDepth * 2;
  const long long start = clock64();
  for (int it = 0; it < iterations; ++it) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int ks = 0; ks < kDepth / 16; ++ks) {
      if constexpr (kRegistersA)
        Wgmma<N>::template registers_shared<kBF16>(d, a_regs, mn_major(b_tile, N, layout, ks), 1);
      else
        Wgmma<N>::template shared_shared<kBF16>(d, k_major(a, 64, layout, ks),
                                                k_major(b_tile, N, layout, ks), 1);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    // Drained every chain: accumulators still in flight at the loop's back
    // edge make ptxas serialize the chain (C7514). The other warpgroups
    // fill the drain.
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  const long long stop = clock64();
  float sum = 0.f;
  for (int i = 0; i < N / 2; ++i) sum += d[i];
  if (sum == 1.2345f) sink[threadIdx.x] = sum;  // keeps the chain alive
  if (threadIdx.x == 0) cycles[blockIdx.x] = stop - start;
}

template <int N, bool kRegistersA>
void measure(int warpgroups, int layout, int sms) {
  const int iterations = 2000;
  const size_t shared = warpgroups * 64 * kDepth * 2 + N * kDepth * 2;
  auto kernel = chain<N, kRegistersA>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  float* sink;
  long long* cycles;
  cudaMalloc(&sink, 384 * sizeof(float));
  cudaMalloc(&cycles, sms * sizeof(long long));
  cudaEvent_t begin, end;
  cudaEventCreate(&begin);
  cudaEventCreate(&end);
  std::vector<float> times;
  for (int rep = 0; rep < 7; ++rep) {
    cudaEventRecord(begin);
    kernel<<<sms, warpgroups * 128, shared>>>(iterations, layout, sink, cycles);
    cudaEventRecord(end);
    cudaEventSynchronize(end);
    float ms = 0;
    cudaEventElapsedTime(&ms, begin, end);
    times.push_back(ms);
  }
  const cudaError_t error = cudaGetLastError();
  std::sort(times.begin(), times.end());
  const double flops = 2.0 * 64 * N * kDepth * iterations * warpgroups * double(sms);
  std::vector<long long> c(sms);
  cudaMemcpy(c.data(), cycles, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  const double per_step = double(c[0]) / (iterations * (kDepth / 16));
  std::printf(
      "%-9s %-10s n=%3d warpgroups=%d  %7.1f TFLOP/s  %6.1f cycles per k16 step (SM 0)%s%s\n",
      kRegistersA ? "RS" : "SS", layout == kNoSwizzle ? "no-swizzle" : "swizzle128", N, warpgroups,
      flops / (times[times.size() / 2] * 1e-3) / 1e12, per_step,
      error != cudaSuccess ? "  ERROR " : "",
      error != cudaSuccess ? cudaGetErrorString(error) : "");
  cudaFree(sink);
  cudaFree(cycles);
}

template <int N>
void both_layouts(bool registers_a, int warpgroups, int sms) {
  for (int layout : {kNoSwizzle, kSwizzle128}) {
    if (registers_a)
      measure<N, true>(warpgroups, layout, sms);
    else
      measure<N, false>(warpgroups, layout, sms);
  }
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  // Shared-shared first; the register-A chains after (a bad MN-major
  // descriptor would fault and end the run).
  for (int warpgroups : {1, 2, 3}) {
    both_layouts<32>(false, warpgroups, sms);
    both_layouts<64>(false, warpgroups, sms);
    both_layouts<80>(false, warpgroups, sms);
    both_layouts<128>(false, warpgroups, sms);
    both_layouts<256>(false, warpgroups, sms);
  }
  for (int warpgroups : {1, 2, 3}) {
    both_layouts<64>(true, warpgroups, sms);
    both_layouts<128>(true, warpgroups, sms);
    both_layouts<256>(true, warpgroups, sms);
  }
  return 0;
}
