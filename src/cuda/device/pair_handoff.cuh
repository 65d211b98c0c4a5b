// Two CTAs of a cluster of two (sm_90) that share one block of scores: the
// sender finishes a block (both warpgroups, each its own row pair of every
// accumulator fragment, as warpgroup_exchange.cuh leaves them) and writes
// those fp32 values into the receiver's shared memory; the receiver's
// warpgroup g, thread t takes them at the positions thread t of the
// sender's warpgroup g held, so no layout changes hands.
//
// Two slots: block j in slot j % 2. Each slot has a "full" barrier in the
// receiver (one arrival per sending warp, release at cluster scope after
// the warp's stores) and an "empty" barrier in the sender (one arrival per
// receiving warp once it has read the slot). Both CTAs must have
// initialised their barriers (init(), then fence_barrier_init() and a
// cluster_sync()) before the first block, and neither may leave while the
// other can still reach its shared memory (a cluster_sync() at the end).
#pragma once

#include "producer_pipeline.cuh"
#include "warpgroup_exchange.cuh"

namespace flashgen_device {

// kTiles: the 8-column tiles of the handed-over accumulator (one row tile).
template <int kTiles>
struct PairHandoff {
  static constexpr int kFloats = other_rows_floats<kTiles>();  // one row pair
  static constexpr int kWarps = 8;                             // two warpgroups
  float slots[2][2][kFloats][kWarpgroupThreads];               // [slot][warpgroup][value][thread]
  u64 full[2];
  u64 empty[2];

  // One thread of each CTA.
  __device__ __forceinline__ void init() {
    for (int s = 0; s < 2; ++s) {
      mbarrier_init(&full[s], kWarps);
      mbarrier_init(&empty[s], kWarps);
    }
  }

  // The sender: this warpgroup's rows of block j's `acc` into the slot of
  // the receiver (cluster rank `receiver`), once it has read block j - 2.
  __device__ __forceinline__ void send(const float (&acc)[1][kTiles][4], int j, u32 receiver,
                                       int group, int group_thread, int lane) {
    const int slot = j & 1;
    if (j >= 2) mbarrier_wait_cluster(&empty[slot], ((j >> 1) + 1) & 1);
    const u32 base = cluster_address(&slots[slot][group][0][group_thread], receiver);
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        store_in_cluster(base + (2 * t + e) * kWarpgroupThreads * sizeof(float),
                         group == 0 ? acc[0][t][e] : acc[0][t][2 + e]);
    __syncwarp();  // the warp's stores come before its arrival (release)
    if (lane == 0) mbarrier_arrive_in_cta(&full[slot], receiver);
  }

  // The receiver: block j's values of this warpgroup's rows into `acc`
  // (the other row pair's elements are zero), then the slot is handed back
  // to the sender (cluster rank `sender`).
  __device__ __forceinline__ void receive(float (&acc)[1][kTiles][4], int j, u32 sender, int group,
                                          int group_thread, int lane) {
    const int slot = j & 1;
    mbarrier_wait_cluster(&full[slot], (j >> 1) & 1);
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float value = slots[slot][group][2 * t + e][group_thread];
        acc[0][t][e] = group == 0 ? value : 0.0f;
        acc[0][t][2 + e] = group == 0 ? 0.0f : value;
      }
    __syncwarp();  // the warp's reads come before its arrival (release)
    if (lane == 0) mbarrier_arrive_in_cta(&empty[slot], sender);
  }
};

}  // namespace flashgen_device
