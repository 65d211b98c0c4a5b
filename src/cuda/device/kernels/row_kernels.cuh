// Small row-parallel kernels of the atomic backward: one warp per query row.
//   BackwardPrepare: Dterm = rowsum(dO ∘ O), and the fp32 dQ accumulator zeroed.
//   ConvertGradQ:    dQ = scale · accumulator, in the element type.
#pragma once

#include "common.cuh"
#include "softmax/row_stats.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

constexpr int kRowKernelWarps = 8;

// The fp32 dQ accumulator is packed [batch][heads_q][seq_q][dim_qk].
__device__ __forceinline__ float* grad_q_accum_row(const AttentionParams& p, int batch, int head,
                                                   int row) {
  return p.grad_q_accum + ((static_cast<index_t>(batch) * p.heads_q + head) * p.seq_q + row) *
                              static_cast<index_t>(p.dim_qk);
}

template <class C>
struct BackwardPrepare {
  static __device__ void run(const AttentionParams& p, unsigned char*) {
    const int lane = threadIdx.x & 31;
    const CtaTile tile = query_tile<kRowKernelWarps, 1>(p);  // a warp per query row
    const int row = tile.row0 + (threadIdx.x >> 5), head = tile.head, batch = tile.batch;
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
    const int lane = threadIdx.x & 31;
    const CtaTile tile = query_tile<kRowKernelWarps, 1>(p);  // a warp per query row
    const int row = tile.row0 + (threadIdx.x >> 5), head = tile.head, batch = tile.batch;
    if (row >= p.seq_q) return;
    u16* grad_q = head_slice<u16>(p.grad_q, batch, head) + row * p.grad_q.stride_seq;
    const float* accum = grad_q_accum_row(p, batch, head, row);
    for (int c = lane; c < C::kDimQK; c += 32)
      grad_q[c * p.grad_q.stride_dim] = from_float<C::kElement>(accum[c] * p.scale);
  }
};

}  // namespace flashgen_device
