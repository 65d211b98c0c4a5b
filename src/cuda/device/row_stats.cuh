// Per-row statistics the backward kernels stage in shared memory: the
// log-sum-exp (converted to the log2 domain the kernels use) and
// Dterm = rowsum(dO ∘ O).
#pragma once

#include "common.cuh"

namespace flashgen_device {

// The base-2 log-sum-exp of a row from the natural-log LSE the forward wrote.
// A row with no visible key (LSE = -inf) gets +inf, so every exp2(s - L2) of
// it is 0 and its gradients vanish; rows past the sequence end likewise.
__device__ __forceinline__ float lse_log2(const RowStatsArg& lse, int batch, int head, int row,
                                          int seq) {
  if (row >= seq) return __int_as_float(0x7f800000u);
  const float x = lse.data[batch * lse.stride_batch + head * lse.stride_heads +
                           row * lse.stride_seq];
  return x == negative_infinity() ? __int_as_float(0x7f800000u) : x * 1.4426950408889634f;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Dterm of one row, summed by a whole warp in fp32 from the element type.
template <int E, int kDimV>
__device__ __forceinline__ float row_dterm(const u16* grad_o, index_t grad_o_stride_dim,
                                           const u16* o, index_t o_stride_dim, int lane) {
  float sum = 0.0f;
  for (int c = lane; c < kDimV; c += 32)
    sum += to_float<E>(grad_o[c * grad_o_stride_dim]) * to_float<E>(o[c * o_stride_dim]);
  return warp_sum(sum);
}

// Dterm and L2 of query rows [row0, row0 + kRows) of one head into shared
// arrays, one warp a row; Dterm also to global for the key/value kernel when
// `write_global` (one CTA per row writes it). grad_o and o point at row0.
template <int E, int kDimV, int kRows, int kWarps>
__device__ __forceinline__ void stage_query_rows(const AttentionParams& p, int batch, int head,
                                                 int row0, const u16* grad_o, const u16* o,
                                                 float* dterm_shared, float* l2_shared,
                                                 bool write_global, int warp, int lane) {
  for (int r = warp; r < kRows; r += kWarps) {
    const int row = row0 + r;
    float dterm = 0.0f;
    if (row < p.seq_q)
      dterm = row_dterm<E, kDimV>(grad_o + r * p.grad_o.stride_seq, p.grad_o.stride_dim,
                                  o + r * p.o.stride_seq, p.o.stride_dim, lane);
    if (lane == 0) {
      dterm_shared[r] = dterm;
      l2_shared[r] = lse_log2(p.lse, batch, head, row, p.seq_q);
      if (write_global && row < p.seq_q)
        p.dterm.data[batch * p.dterm.stride_batch + head * p.dterm.stride_heads +
                     row * p.dterm.stride_seq] = dterm;
    }
  }
}

}  // namespace flashgen_device
