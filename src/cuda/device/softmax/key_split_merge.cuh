// Warps that split a row tile's keys (the mma.sync forward's split=keys)
// each hold an online softmax (softmax/softmax.cuh) and an output over their
// own keys. merge() makes them one, in warp 0: each warp's rows are
// rescaled to the rows' maxima over all warps, then the other warps'
// outputs and sums go through shared memory into warp 0's, in warp order
// (the same bits on every run).
#pragma once

#include "common.cuh"
#include "softmax/softmax.cuh"

namespace flashgen_device {

template <int kWarps, int kRowTiles, int kOutTiles>
struct KeySplitMerge {
  static constexpr int kRows = 16 * kRowTiles;
  // A warp's outputs and row sums, lane by lane.
  static constexpr int kPartial = 32 * kRowTiles * (4 * kOutTiles + 2);
  // The warps' row maxima, then the partials of warps 1 .. kWarps - 1.
  static constexpr int kBytes = 4 * (kWarps * kRows + (kWarps - 1) * kPartial);

  // `scratch`: kBytes of shared memory no thread uses meanwhile. All
  // kWarps warps call it; on return warp 0 holds the merged softmax and
  // output (the others' are spent).
  static __device__ __forceinline__ void merge(float* scratch, OnlineSoftmax<kRowTiles>& softmax,
                                               float (&o)[kRowTiles][kOutTiles][4], int warp,
                                               int lane) {
    float* maxima = scratch;                      // [warp][row]
    float* partials = maxima + kWarps * kRows;    // [warp - 1][element][lane]
    const int g = lane >> 2;
    __syncthreads();  // every warp is done with what the scratch held
    if ((lane & 3) == 0)
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          maxima[warp * kRows + rt * 16 + g + 8 * h] = softmax.row_max[rt][h];
    __syncthreads();
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float row_max = kMaskedScore;
#pragma unroll
        for (int w = 0; w < kWarps; ++w)
          row_max = max_of(row_max, maxima[w * kRows + rt * 16 + g + 8 * h]);
        // As OnlineSoftmax::update's correction: 0 for a warp that saw no key.
        const float factor = fast_exp2(softmax.row_max[rt][h] - softmax_base(row_max));
        softmax.row_max[rt][h] = row_max;
        softmax.row_sum[rt][h] *= factor;
#pragma unroll
        for (int nt = 0; nt < kOutTiles; ++nt) {
          o[rt][nt][2 * h] *= factor;
          o[rt][nt][2 * h + 1] *= factor;
        }
      }
    if (warp != 0) {
      float* mine = partials + (warp - 1) * kPartial + lane;
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
        for (int nt = 0; nt < kOutTiles; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) mine[32 * ((rt * kOutTiles + nt) * 4 + i)] = o[rt][nt][i];
#pragma unroll
        for (int h = 0; h < 2; ++h)
          mine[32 * (kRowTiles * kOutTiles * 4 + rt * 2 + h)] = softmax.row_sum[rt][h];
      }
    }
    __syncthreads();
    if (warp != 0) return;
#pragma unroll 1
    for (int w = 1; w < kWarps; ++w) {
      const float* theirs = partials + (w - 1) * kPartial + lane;
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
        for (int nt = 0; nt < kOutTiles; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) o[rt][nt][i] += theirs[32 * ((rt * kOutTiles + nt) * 4 + i)];
#pragma unroll
        for (int h = 0; h < 2; ++h)
          softmax.row_sum[rt][h] += theirs[32 * (kRowTiles * kOutTiles * 4 + rt * 2 + h)];
      }
    }
  }
};

}  // namespace flashgen_device
