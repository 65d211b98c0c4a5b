// Forward for fp32 tensors on the CUDA cores (kernels/f32/simt.cuh): one CTA owns
// 8 query rows per warp (and one chunk of the value columns) and traverses
// key blocks of 32 with an online softmax in the log2 domain, as the
// tensor-core forward does:
//
//   S = Q·Kᵀ (a lane's key against the warp's rows),  P = exp2(S·scale·log2e − m)
//   O = O·correction + P·V
#pragma once

#include "kernels/f32/simt.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated): kDimQK, kDimV, kWarps, kHeadChunks (CTAs splitting the value
// columns), kCausal.
template <class C>
struct ForwardF32 {
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr int kBlockM = C::kWarps * kSimtRowsPerWarp;
  static constexpr int kDimQK = simt_row_width(C::kDimQK);  // zero past Dqk
  static constexpr int kDvChunk = simt_chunk(C::kDimV, C::kHeadChunks);
  static constexpr int kKStride = odd_stride(kDimQK);

  struct SharedStorage {
    float q[kBlockM * kDimQK];      // [kBlockM][Dqk rounded up to 4]
    float k[kSimtBlockN * kKStride];  // [32][Dqk rounded up to 4], odd stride
    float v[kSimtBlockN * kDvChunk];  // [32][chunk]
  };

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const CtaTile tile = query_tile<kBlockM, C::kHeadChunks, false, C::kCausal>(p);
    const int head = tile.head, kv_head = tile.kv_head, batch = tile.batch, row0 = tile.row0;
    const float slope = alibi_slope_log2<C>(p, batch, head);
    const int chunk = tile.chunk;
    const int warp_row0 = row0 + warp * kSimtRowsPerWarp;
    const int dv0 = chunk * kDvChunk;
    const int value_cols = min_of(C::kDimV - dv0, kDvChunk);

    const float* q = head_slice<const float>(p.q, batch, head) + row0 * p.q.stride_seq;
    const float* k = head_slice<const float>(p.k, batch, kv_head);
    const float* v = head_slice<const float>(p.v, batch, kv_head) + dv0 * p.v.stride_dim;

    const BlockRange key_blocks =
        key_blocks_for_rows<C, kSimtBlockN>(p, row0, kBlockM, batch, head);
    load_f32_tile<kBlockM, kDimQK, kDimQK, kThreads>(smem.q, q, p.q.stride_seq, p.q.stride_dim,
                                                     p.seq_q - row0, C::kDimQK, thread);

    float o[kSimtRowsPerWarp][kDvChunk / 32];
    float row_max[kSimtRowsPerWarp], row_sum[kSimtRowsPerWarp];
    zero_rows<kDvChunk>(o);
#pragma unroll
    for (int r = 0; r < kSimtRowsPerWarp; ++r) {
      row_max[r] = negative_infinity();
      row_sum[r] = 0.0f;
    }
    const float* q_warp = smem.q + warp * kSimtRowsPerWarp * kDimQK;

    for (int n_block = key_blocks.first; n_block < key_blocks.end; ++n_block) {
      const int key0 = n_block * kSimtBlockN;
      __syncthreads();  // every warp is done with the previous K and V (and Q is in)
      load_f32_tile<kSimtBlockN, kDimQK, kKStride, kThreads>(
          smem.k, k + key0 * p.k.stride_seq, p.k.stride_seq, p.k.stride_dim, p.seq_kv - key0,
          C::kDimQK, thread);
      load_f32_tile<kSimtBlockN, kDvChunk, kDvChunk, kThreads>(
          smem.v, v + key0 * p.v.stride_seq, p.v.stride_seq, p.v.stride_dim, p.seq_kv - key0,
          value_cols, thread);
      __syncthreads();

      float s[kSimtRowsPerWarp];
      dot_rows<kDimQK, kDimQK>(s, q_warp, smem.k + lane * kKStride);
      const int key = key0 + lane;
#pragma unroll
      for (int r = 0; r < kSimtRowsPerWarp; ++r) {
        const float scaled =
            visible<C>(p, batch, head, warp_row0 + r, key)
                ? logit<C>(s[r], p) - alibi_bias<C>(slope, p, warp_row0 + r, key)
                : negative_infinity();
        const float new_max = max_of(row_max[r], warp_max(scaled));
        // Until a row has seen a key its maximum is -inf: nothing to correct.
        const bool none = new_max == negative_infinity();
        const float correction = none ? 1.0f : exp2f(row_max[r] - new_max);
        s[r] = none ? 0.0f : exp2f(scaled - new_max);
        row_sum[r] = row_sum[r] * correction + warp_sum(s[r]);
        row_max[r] = new_max;
#pragma unroll
        for (int c = 0; c < kDvChunk / 32; ++c) o[r][c] *= correction;
      }
      accumulate_product<kDvChunk, kDvChunk>(o, s, smem.v, lane);
    }

    // A row with no visible key gets O = 0 and LSE = -inf, or the sink's
    // logit with kSinks (the sink joins each row's denominator; both terms
    // are taken relative to the larger of the row's maximum and the sink).
    float inverse_sum[kSimtRowsPerWarp], row_lse[kSimtRowsPerWarp];
    const float sink = sink_log2<C>(p, head);
#pragma unroll
    for (int r = 0; r < kSimtRowsPerWarp; ++r) {
      const bool seen = row_sum[r] > 0.0f;
      if constexpr (C::kSinks) {
        const float top = max_of(row_max[r], sink);
        const float rescale = seen ? exp2f(row_max[r] - top) : 0.0f;
        const float total = row_sum[r] * rescale + exp2f(sink - top);
        inverse_sum[r] = rescale / total;
        row_lse[r] = (top + log2f(total)) * kLn2;
      } else {
        inverse_sum[r] = seen ? 1.0f / row_sum[r] : 0.0f;
        row_lse[r] = seen ? (row_max[r] + log2f(row_sum[r])) * kLn2 : negative_infinity();
      }
    }
    float* out = head_slice<float>(p.o, batch, head);
    store_rows<kDvChunk>(out, p.o.stride_seq, p.o.stride_dim, o, inverse_sum, warp_row0, p.seq_q,
                         dv0, C::kDimV, lane);
    if (chunk == 0 && p.lse.data != nullptr && lane < kSimtRowsPerWarp) {
      const int row = warp_row0 + lane;
      float lse = negative_infinity();
#pragma unroll
      for (int r = 0; r < kSimtRowsPerWarp; ++r)
        if (r == lane) lse = row_lse[r];
      if (row < p.seq_q)
        p.lse.data[batch * p.lse.stride_batch + head * p.lse.stride_heads +
                   row * p.lse.stride_seq] = lse;
    }
  }
};

}  // namespace flashgen_device
