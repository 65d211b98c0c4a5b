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
  return x == negative_infinity() ? __int_as_float(0x7f800000u) : x * kLog2e;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    x = max_of(x, __shfl_xor_sync(0xffffffffu, x, offset));
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
// `write_global` (one CTA per row writes it). row_dterm(r) is Dterm of row
// row0 + r (inside the sequence), summed by the whole warp.
template <int kRows, int kWarps, class RowDterm>
__device__ __forceinline__ void stage_rows(const AttentionParams& p, int batch, int head, int row0,
                                           float* dterm_shared, float* l2_shared,
                                           bool write_global, int warp, int lane,
                                           RowDterm row_dterm) {
  for (int r = warp; r < kRows; r += kWarps) {
    const int row = row0 + r;
    float dterm = 0.0f;
    if (row < p.seq_q) dterm = row_dterm(r);
    if (lane == 0) {
      dterm_shared[r] = dterm;
      l2_shared[r] = lse_log2(p.lse, batch, head, row, p.seq_q);
      if (write_global && row < p.seq_q)
        p.dterm.data[batch * p.dterm.stride_batch + head * p.dterm.stride_heads +
                     row * p.dterm.stride_seq] = dterm;
    }
  }
}

// L2 and Dterm (from the query kernel) of the traversed query rows [query0,
// query0 + kRows) of one head into shared arrays, as the key/value kernels
// need them; `threads` threads from `thread` on share the rows. Rows past the
// sequence end get L2 = +inf (no probability) and Dterm 0.
template <int kRows>
__device__ __forceinline__ void stage_traversed_rows(const AttentionParams& p, int batch, int head,
                                                     int query0, float* l2_shared,
                                                     float* dterm_shared, int thread,
                                                     int threads) {
  for (int i = thread; i < kRows; i += threads) {
    const int row = query0 + i;
    l2_shared[i] = lse_log2(p.lse, batch, head, row, p.seq_q);
    dterm_shared[i] = row < p.seq_q ? p.dterm.data[batch * p.dterm.stride_batch +
                                                   head * p.dterm.stride_heads +
                                                   row * p.dterm.stride_seq]
                                    : 0.0f;
  }
}

// stage_rows() for 16-bit dO and O; grad_o and o point at row0.
template <int E, int kDimV, int kRows, int kWarps>
__device__ __forceinline__ void stage_query_rows(const AttentionParams& p, int batch, int head,
                                                 int row0, const u16* grad_o, const u16* o,
                                                 float* dterm_shared, float* l2_shared,
                                                 bool write_global, int warp, int lane) {
  stage_rows<kRows, kWarps>(p, batch, head, row0, dterm_shared, l2_shared, write_global, warp,
                            lane, [&](int r) {
                              return row_dterm<E, kDimV>(grad_o + r * p.grad_o.stride_seq,
                                                         p.grad_o.stride_dim,
                                                         o + r * p.o.stride_seq, p.o.stride_dim,
                                                         lane);
                            });
}

}  // namespace flashgen_device
