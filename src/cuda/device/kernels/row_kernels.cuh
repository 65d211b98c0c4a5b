// Small row-parallel kernels: one warp per query row.
//   BackwardPrepare: Dterm = rowsum(dO ∘ O), and the fp32 dQ accumulator zeroed.
//   ConvertGradQ:    dQ = scale · accumulator, in the element type.
//   CombineSplits:   O and LSE from the split-key forward's partial results
//                    (2 to 8 warps a row where a row has 16 shares or more).
//   SinkGradients:   dL/dsink per query head (a CTA per head).
#pragma once

#include "common.cuh"
#include "epilogue/store.cuh"
#include "softmax/row_stats.cuh"
#include "scheduler/cta_tile.cuh"
#include "scheduler/sequences.cuh"

namespace flashgen_device {

constexpr int kRowKernelWarps = 8;

// The query row a warp of a row kernel owns (rows past seq_q in the last
// CTA have none: the kernels return there), its head and batch, and the lane.
// (The combine's grid has rows x parts warps: its `row` counts those.)
struct WarpRow {
  int row, head, batch, lane;
};
__device__ __forceinline__ WarpRow warp_row(const AttentionParams& p) {
  const CtaTile tile = query_tile<kRowKernelWarps, 1>(p);  // a warp per query row
  return {tile.row0 + int(threadIdx.x >> 5), tile.head, tile.batch, int(threadIdx.x & 31)};
}

// The fp32 dQ accumulator is packed [batch][heads_q][seq_q][dim_qk].
__device__ __forceinline__ float* grad_q_accum_row(const AttentionParams& p, int batch, int head,
                                                   int row) {
  return p.grad_q_accum + ((static_cast<index_t>(batch) * p.heads_q + head) * p.seq_q + row) *
                              static_cast<index_t>(p.dim_qk);
}

template <class C>
struct BackwardPrepare {
  static __device__ void run(const AttentionParams& p, unsigned char*) {
    const auto [row, head, batch, lane] = warp_row(p);
    if (row >= p.seq_q) return;
    const u16* grad_o = head_slice<const u16>(p.grad_o, batch, head) + row * p.grad_o.stride_seq;
    const u16* o = head_slice<const u16>(p.o, batch, head) + row * p.o.stride_seq;
    const float dterm = row_dterm<C::kElement, C::kDimV>(grad_o, p.grad_o.stride_dim, o,
                                                         p.o.stride_dim, lane);
    if (lane == 0)
      p.dterm.data[batch * p.dterm.stride_batch + head * p.dterm.stride_heads +
                   row * p.dterm.stride_seq] = dterm;
    float* accum = grad_q_accum_row(p, batch, head, row);
    for (int c = lane; c < C::kDimQK; c += 32) accum[c] = 0.0f;
  }
};

template <class C>
struct ConvertGradQ {
  static __device__ void run(const AttentionParams& p, unsigned char*) {
    const auto [row, head, batch, lane] = warp_row(p);
    if (row >= p.seq_q) return;
    u16* grad_q = head_slice<u16>(p.grad_q, batch, head) + row * p.grad_q.stride_seq;
    const float* accum = grad_q_accum_row(p, batch, head, row);
    for (int c = lane; c < C::kDimQK; c += 32)
      grad_q[c * p.grad_q.stride_dim] = from_float<C::kElement>(accum[c] * p.scale);
  }
};

// The split-key forward's shares merged, in a fixed order (the same bits on
// every run): with L = log Σ_s exp(lse_s), O = Σ_s exp(lse_s − L) · O_s,
// each O_s normalized by its own share's sum. Empty shares (lse_s = −inf)
// weigh nothing; a row with no key at all gets O = 0 and LSE = −inf. With
// sinks (kSinks) the row's sink (its head's, or the row's where the query
// heads are packed as rows) joins L as one more term with no value.
// A row of one decode step has tens of shares: `parts` warps of a CTA
// (combine_warps_per_row) each take every parts-th share, their lanes read
// the LSEs side by side (reduced across the warp, then across the parts in
// order through shared memory), and each share's weight goes to every lane
// by a shuffle, so the shares' O rows are read back to back rather than
// behind a chain of dependent loads.
template <class C>
struct CombineSplits {
  // Output columns a lane accumulates at once: 8 (256 columns a pass).
  static constexpr int kColumnsPerLane = 8;
  static constexpr int kPassColumns = 32 * kColumnsPerLane;

  static __device__ void run(const AttentionParams& p, unsigned char*) {
    __shared__ float part_stat[kRowKernelWarps];
    __shared__ float part_o[kRowKernelWarps][kPassColumns];
    const int parts = combine_warps_per_row(p.key_splits);
    const WarpRow unit = warp_row(p);  // rows x parts warps
    const int row = unit.row / parts, part = unit.row % parts, lane = unit.lane;
    const int head = unit.head, batch = unit.batch;
    const int first_warp = int(threadIdx.x >> 5) - part;  // the row's warps are adjacent
    // Rows past seq_q (the last CTA) compute nothing but still meet the
    // CTA's barriers; with one part there are none.
    const bool in_range = row < p.seq_q;
    if (!in_range && parts == 1) return;
    // This warp's shares: part, part + parts, ...; share s's row of the
    // partial results (partial_row: shares outermost).
    const int count = in_range ? (p.key_splits - part + parts - 1) / parts : 0;
    const index_t row0 = partial_row(p, part, batch, head, in_range ? row : 0);
    const index_t share_stride = static_cast<index_t>(p.batch) * p.heads_q * p.seq_q * parts;
    const auto share_lse = [&](int k) { return p.partial_lse[row0 + k * share_stride]; };
    // The parts' values of the row, in order (one part: the warp's own).
    const auto across_parts = [&](float mine, bool largest) {
      if (parts == 1) return mine;
      if (lane == 0) part_stat[threadIdx.x >> 5] = mine;
      __syncthreads();
      float all = part_stat[first_warp];
      for (int k = 1; k < parts; ++k)
        all = largest ? fmaxf(all, part_stat[first_warp + k]) : all + part_stat[first_warp + k];
      __syncthreads();
      return all;
    };
    const float sink = C::kSinks && in_range
                           ? p.sinks[head * p.sinks_stride + row * p.sinks_row_stride]
                           : negative_infinity();
    float most = negative_infinity();
    for (int k = lane; k < count; k += 32) most = fmaxf(most, share_lse(k));
    most = fmaxf(across_parts(warp_max(most), true), sink);
    float sum = 0.0f;
    if (most != negative_infinity())
      for (int k = lane; k < count; k += 32) sum += expf(share_lse(k) - most);
    sum = across_parts(warp_sum(sum), false);
    if (C::kSinks && most != negative_infinity()) sum += expf(sink - most);
    const float lse = sum > 0.0f ? most + logf(sum) : negative_infinity();
    u16* o = head_slice<u16>(p.o, batch, head) + (in_range ? row : 0) * p.o.stride_seq;
    for (int c0 = 0; c0 < C::kDimV; c0 += kPassColumns) {
      float x[kColumnsPerLane] = {};
      for (int first = 0; sum > 0.0f && first < count; first += 32) {
        const int mine = first + lane;
        const float weight = mine < count ? expf(share_lse(mine) - lse) : 0.0f;
        const int batch_count = min(32, count - first);
#pragma unroll 4
        for (int j = 0; j < batch_count; ++j) {
          const float w = __shfl_sync(0xffffffffu, weight, j);
          const float* share_o = p.partial_o + (row0 + (first + j) * share_stride) * p.dim_v + c0 + lane;
#pragma unroll
          for (int i = 0; i < kColumnsPerLane; ++i)
            if (c0 + lane + 32 * i < C::kDimV) x[i] += w * share_o[32 * i];
        }
      }
      if (parts > 1) {  // the parts' sums in order, by the row's first warp
#pragma unroll
        for (int i = 0; i < kColumnsPerLane; ++i) part_o[threadIdx.x >> 5][lane + 32 * i] = x[i];
        __syncthreads();
        if (part == 0)
#pragma unroll
          for (int i = 0; i < kColumnsPerLane; ++i) {
            x[i] = part_o[first_warp][lane + 32 * i];
            for (int k = 1; k < parts; ++k) x[i] += part_o[first_warp + k][lane + 32 * i];
          }
        __syncthreads();
      }
      if (part == 0 && in_range)
#pragma unroll
        for (int i = 0; i < kColumnsPerLane; ++i) {
          const int c = c0 + lane + 32 * i;
          if (c < C::kDimV) o[c * p.o.stride_dim] = from_float<C::kElement>(x[i]);
        }
    }
    if (part == 0 && in_range && lane == 0 && p.lse.data != nullptr)
      p.lse.data[batch * p.lse.stride_batch + head * p.lse.stride_heads +
                 row * p.lse.stride_seq] = lse;
  }
};

// dL/dsink[h] = −Σ over batches and rows of exp(sink[h] − LSE) · Dterm: the
// softmax gradient of the sink's column, whose dP is 0. One CTA per query
// head (blockIdx.y), each thread a fixed stride of the rows, then the warps'
// sums in order: the same bits on every run.
template <class C>
struct SinkGradients {
  static __device__ void run(const AttentionParams& p, unsigned char*) {
    __shared__ float warp_sums[kRowKernelWarps];
    const int head = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float sink = p.sinks[head * p.sinks_stride];
    const int rows = p.batch * p.seq_q;
    float sum = 0.0f;
    for (int r = threadIdx.x; r < rows; r += kRowKernelWarps * 32) {
      const int batch = r / p.seq_q, row = r % p.seq_q;
      // Packed sequences: the rows of batch entry `batch` start at its
      // first packed row, and its Dterm holds none past its length.
      int first = 0;
      if (p.q_begin != nullptr) {
        const PackedRows q = packed_rows(p.q_begin, p.q_begin_stride, batch, p.total_q);
        if (row >= q.end - q.first) continue;
        first = q.first;
      }
      const float lse = p.lse.data[batch * p.lse.stride_batch + head * p.lse.stride_heads +
                                   (first + row) * p.lse.stride_seq];
      const float dterm = p.dterm.data[batch * p.dterm.stride_batch +
                                       head * p.dterm.stride_heads + row * p.dterm.stride_seq];
      sum += expf(sink - lse) * dterm;
    }
    sum = warp_sum(sum);
    if (lane == 0) warp_sums[warp] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
      float total = 0.0f;
      for (int w = 0; w < kRowKernelWarps; ++w) total += warp_sums[w];
      p.grad_sinks[head * p.grad_sinks_stride] = -total;
    }
  }
};

}  // namespace flashgen_device
