// The shared-memory hand-over of the key/value kernels' producer, alone, for
// the race checker: one producer warp stores a stage of row statistics with
// plain stores and publishes it on an mbarrier; one consumer warp waits,
// reads it and frees the stage on a second mbarrier; the producer waits for
// that before it stores the next block into the same stage.
//   lane0: lanes store, __syncwarp, lane 0 arrives (ordered by the PTX
//          memory model: the warp barrier orders the lanes' stores before
//          lane 0's release, which the waiter acquires).
//   all:   every lane arrives after its own stores (what the kernels do).
// Usage: handover_pattern lane0|all   (exit status 0 when the values agree)
#include <cstdio>
#include <cstring>

__device__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ void arrive(unsigned long long* bar) {
  asm volatile("{ .reg .b64 s; mbarrier.arrive.shared::cta.b64 s, [%0]; }" ::"r"(smem_address(bar))
               : "memory");
}
__device__ void wait(unsigned long long* bar, unsigned parity) {
  asm volatile("{ .reg .pred p; w: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra w; }"
               ::"r"(smem_address(bar)), "r"(parity) : "memory");
}

template <bool kEveryLane>
__global__ void handover(float* out, int blocks) {
  __shared__ float stats[32];
  __shared__ unsigned long long full, empty;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) {
    const unsigned arrivals = kEveryLane ? 32 : 1;
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(&full)), "r"(arrivals));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(&empty)), "r"(arrivals));
  }
  __syncthreads();
  float sum = 0.0f;
  for (int j = 0; j < blocks; ++j) {
    if (warp == 0) {  // producer
      if (j > 0) wait(&empty, (j - 1) & 1);
      stats[lane] = float(j * 32 + lane);
      if (!kEveryLane) __syncwarp();
      if (kEveryLane || lane == 0) arrive(&full);
    } else {  // consumer
      wait(&full, j & 1);
      sum += stats[(lane + 1) & 31];  // another lane's store
      if (!kEveryLane) __syncwarp();
      if (kEveryLane || lane == 0) arrive(&empty);
    }
  }
  if (warp == 1) out[lane] = sum;
}

int main(int argc, char** argv) {
  const bool every_lane = argc > 1 && std::strcmp(argv[1], "all") == 0;
  const int blocks = 4;
  float* out = nullptr;
  if (cudaMalloc(&out, 32 * sizeof(float)) != cudaSuccess) return 2;
  if (every_lane) handover<true><<<1, 64>>>(out, blocks);
  else handover<false><<<1, 64>>>(out, blocks);
  float host[32];
  if (cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost) != cudaSuccess) return 2;
  int wrong = 0;
  for (int lane = 0; lane < 32; ++lane) {
    float expected = 0.0f;
    for (int j = 0; j < blocks; ++j) expected += float(j * 32 + ((lane + 1) & 31));
    wrong += host[lane] != expected;
  }
  std::printf("handover_pattern %s: %s\n", every_lane ? "all" : "lane0", wrong ? "WRONG" : "ok");
  cudaFree(out);
  return wrong ? 1 : 0;
}
