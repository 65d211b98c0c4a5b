// Two computing warpgroups that split a GEMM's contraction (the head dims)
// and meet through shared memory (split=dims): each holds partial sums of
// the same accumulator fragments, thread t of one at the positions thread t
// of the other holds. A thread's fragments cover two rows (elements 0-1 and
// 2-3 of each 8-column tile); warpgroup g finishes row pair g:
//
//   sum_partials       hands the other pair's partial sums over, waits for
//                      both warpgroups (a named barrier), adds the other's
//                      partial sums of its own pair
//   ... finish its rows (softmax side), pack them as A fragments ...
//   exchange_words     hands its words of each A fragment over (m16n8k16
//                      layout: words g and g + 2 hold row pair g), waits,
//                      takes the other's
//
// Buffers are [warpgroup][value][thread] (conflict-free); one buffer per
// warpgroup does when the two barriers alternate: a warpgroup writes again
// only after the barrier that follows the other's read.
#pragma once

#include "common.cuh"
#include "arch/wgmma.cuh"
#include "layout/shared_memory.cuh"
#include "pipeline/producer_pipeline.cuh"
#include "pipeline/warp_specialized.cuh"

namespace flashgen_device {

constexpr int kWarpgroupThreads = 128;

// The shape the split=dims kernels (key/value and query side) share: two
// computing warpgroups over the CTA's 64 rows beside a producer warpgroup,
// each contracting over half of the head dims (widths rounded up to 32, so
// that each half is whole k steps); the traversed tiles copied by TMA, on
// rows that are not 16-byte aligned through their token-row views (the
// tiles widened, a head's columns from its shift on; the producer
// warpgroup's second warp zeroes the other heads' columns of each stage).
template <class C>
struct SplitDimsShape {
  static constexpr int E = C::kElement;
  static constexpr int kBlockM = 64;  // rows per CTA, shared by both warpgroups
  static constexpr int kBlockN = C::kBlockN;
  static constexpr bool kTokenRows = C::kVec < 8;
  static constexpr int kDimQK = split_dims_tile_width(C::kDimQK, C::kVec, kTokenRows);
  static constexpr int kDimV = split_dims_tile_width(C::kDimV, C::kVec, kTokenRows);
  static constexpr int kHalfQK = kDimQK / 2, kHalfV = kDimV / 2;
  static constexpr int kConsumerWarps = C::kWarps;
  static constexpr int kBothGroups = 2 * kWarpgroupThreads;
  static_assert(C::kTma && C::kVec >= 1, "the traversed tiles are copied by TMA");
  typedef WarpSpecialized<C::kWarps, true, kTokenRows ? 32 : 24> Roles;
  typedef typename Roles::Registers Registers;
  typedef TraversedTile<kBlockN, kDimQK, true, C::kSwizzle> TraversedQK;  // Q's or K's
  typedef TraversedTile<kBlockN, kDimV, true, C::kSwizzle> TraversedV;    // dO's or V's
};

// The floats sum_partials exchanges per array of kTiles tiles, and the
// words exchange_words exchanges per kSteps k steps.
template <int kTiles>
constexpr int other_rows_floats() {
  return 2 * kTiles;
}
template <int kSteps>
constexpr int own_words() {
  return 2 * kSteps;
}

// f(k, e) for each of kCount pairs of exchanged values (e = 0, 1), whose
// buffer row is 2k + e.
template <int kCount, class F>
__device__ __forceinline__ void for_each_exchanged(F f) {
#pragma unroll
  for (int k = 0; k < kCount; ++k)
#pragma unroll
    for (int e = 0; e < 2; ++e) f(k, e);
}

// The pairs are chosen by selects, not by indexing with the warpgroup:
// registers indexed at run time would live in local memory.
template <int kTiles>
__device__ __forceinline__ void write_other_rows(float (*out)[kWarpgroupThreads],
                                                 const float (&acc)[1][kTiles][4], int group,
                                                 int group_thread) {
  for_each_exchanged<kTiles>([&](int t, int e) {
    out[2 * t + e][group_thread] = group == 0 ? acc[0][t][2 + e] : acc[0][t][e];
  });
}

template <int kTiles>
__device__ __forceinline__ void add_own_rows(const float (*in)[kWarpgroupThreads],
                                             float (&acc)[1][kTiles][4], int group,
                                             int group_thread) {
  for_each_exchanged<kTiles>([&](int t, int e) {
    const float other = in[2 * t + e][group_thread];
    if (group == 0) {
      acc[0][t][e] += other;
    } else {
      acc[0][t][2 + e] += other;
    }
  });
}

template <int kSteps>
__device__ __forceinline__ void write_own_words(u32 (*out)[kWarpgroupThreads],
                                                const u32 (&frag)[kSteps][1][4], int group,
                                                int group_thread) {
  for_each_exchanged<kSteps>([&](int ks, int e) {
    out[2 * ks + e][group_thread] = group == 0 ? frag[ks][0][2 * e] : frag[ks][0][1 + 2 * e];
  });
}

template <int kSteps>
__device__ __forceinline__ void read_other_words(const u32 (*in)[kWarpgroupThreads],
                                                 u32 (&frag)[kSteps][1][4], int group,
                                                 int group_thread) {
  for_each_exchanged<kSteps>([&](int ks, int e) {
    const u32 other = in[2 * ks + e][group_thread];
    if (group == 0) {
      frag[ks][0][1 + 2 * e] = other;
    } else {
      frag[ks][0][2 * e] = other;
    }
  });
}

// The partial sums of `a` (and `b`) through `buffers` (kFloats: those of
// every array), both warpgroups meeting at named barrier `barrier`.
template <int kFloats, int kTiles>
__device__ __forceinline__ void sum_partials(float (&buffers)[2][kFloats][kWarpgroupThreads],
                                             int barrier, int group, int group_thread,
                                             float (&a)[1][kTiles][4]) {
  static_assert(kFloats >= other_rows_floats<kTiles>(), "room for one array");
  write_other_rows(buffers[group], a, group, group_thread);
  named_barrier_sync(barrier, 2 * kWarpgroupThreads);
  add_own_rows(buffers[1 - group], a, group, group_thread);
}
template <int kFloats, int kTiles>
__device__ __forceinline__ void sum_partials(float (&buffers)[2][kFloats][kWarpgroupThreads],
                                             int barrier, int group, int group_thread,
                                             float (&a)[1][kTiles][4], float (&b)[1][kTiles][4]) {
  constexpr int kSecond = other_rows_floats<kTiles>();
  static_assert(kFloats >= 2 * kSecond, "room for two arrays");
  write_other_rows(buffers[group], a, group, group_thread);
  write_other_rows(buffers[group] + kSecond, b, group, group_thread);
  named_barrier_sync(barrier, 2 * kWarpgroupThreads);
  add_own_rows(buffers[1 - group], a, group, group_thread);
  add_own_rows(buffers[1 - group] + kSecond, b, group, group_thread);
}

// The A fragments `frag`, whole in both warpgroups after it.
template <int kWords, int kSteps>
__device__ __forceinline__ void exchange_words(u32 (&buffers)[2][kWords][kWarpgroupThreads],
                                               int barrier, int group, int group_thread,
                                               u32 (&frag)[kSteps][1][4]) {
  static_assert(kWords >= own_words<kSteps>(), "room for a warpgroup's words");
  write_own_words(buffers[group], frag, group, group_thread);
  named_barrier_sync(barrier, 2 * kWarpgroupThreads);
  read_other_words(buffers[1 - group], frag, group, group_thread);
}

}  // namespace flashgen_device
