// Two computing warpgroups that split a GEMM's contraction (the head dims)
// and meet through shared memory (split=dims): each holds partial sums of
// the same accumulator fragments, thread t of one at the positions thread t
// of the other holds. A thread's fragments cover two rows (elements 0-1 and
// 2-3 of each 8-column tile); warpgroup g finishes row pair g:
//
//   write_other_rows   the other pair's partial sums, for the other warpgroup
//   (named barrier)
//   add_own_rows       the other's partial sums of its own pair, added
//   ... finish its rows (softmax side), pack them as A fragments ...
//   write_own_words    its words of each A fragment (m16n8k16 layout: words
//   (named barrier)    g and g + 2 hold row pair g)
//   read_other_words   the other's words
//
// Buffers are [warpgroup][value][thread] (conflict-free); one buffer per
// warpgroup does when the two barriers alternate: a warpgroup writes again
// only after the barrier that follows the other's read.
#pragma once

#include "common.cuh"

namespace flashgen_device {

constexpr int kWarpgroupThreads = 128;

// The floats write_other_rows writes per array of kTiles tiles, and the
// words write_own_words writes per kSteps k steps.
template <int kTiles>
constexpr int other_rows_floats() {
  return 2 * kTiles;
}
template <int kSteps>
constexpr int own_words() {
  return 2 * kSteps;
}

// The pairs are chosen by selects, not by indexing with the warpgroup:
// registers indexed at run time would live in local memory.
template <int kTiles>
__device__ __forceinline__ void write_other_rows(float (*out)[kWarpgroupThreads],
                                                 const float (&acc)[1][kTiles][4], int group,
                                                 int group_thread) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int e = 0; e < 2; ++e)
      out[2 * t + e][group_thread] = group == 0 ? acc[0][t][2 + e] : acc[0][t][e];
}

template <int kTiles>
__device__ __forceinline__ void add_own_rows(const float (*in)[kWarpgroupThreads],
                                             float (&acc)[1][kTiles][4], int group,
                                             int group_thread) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float other = in[2 * t + e][group_thread];
      if (group == 0) {
        acc[0][t][e] += other;
      } else {
        acc[0][t][2 + e] += other;
      }
    }
}

template <int kSteps>
__device__ __forceinline__ void write_own_words(u32 (*out)[kWarpgroupThreads],
                                                const u32 (&frag)[kSteps][1][4], int group,
                                                int group_thread) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
    for (int e = 0; e < 2; ++e)
      out[2 * ks + e][group_thread] = group == 0 ? frag[ks][0][2 * e] : frag[ks][0][1 + 2 * e];
}

template <int kSteps>
__device__ __forceinline__ void read_other_words(const u32 (*in)[kWarpgroupThreads],
                                                 u32 (&frag)[kSteps][1][4], int group,
                                                 int group_thread) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const u32 other = in[2 * ks + e][group_thread];
      if (group == 0) {
        frag[ks][0][1 + 2 * e] = other;
      } else {
        frag[ks][0][2 * e] = other;
      }
    }
}

}  // namespace flashgen_device
