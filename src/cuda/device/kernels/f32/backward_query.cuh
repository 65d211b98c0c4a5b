// Backward, query side, for fp32 tensors on the CUDA cores (kernels/f32/simt.cuh):
// one CTA owns 8 query rows per warp (and one chunk of dQ's columns) and
// traverses key blocks of 32, like the forward. Three products:
//
//   S  = Q·Kᵀ,  P = exp2(S·scale·log2e − L2)      (recomputed, L2 from the LSE)
//   dP = dO·Vᵀ
//   dS = P ∘ (dP − Dterm),  dQ += dS·K             (dQ = scale · Σ dS·K)
//
// It first computes Dterm = rowsum(dO ∘ O) of its rows and writes it for the
// key/value kernel, which runs next. No atomics: each dQ element has one owner.
#pragma once

#include "kernels/f32/simt.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated): kDimQK, kDimV, kWarps, kHeadChunks (CTAs splitting dQ's
// columns), kCausal.
template <class C>
struct BackwardQueryF32 {
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr int kBlockM = C::kWarps * kSimtRowsPerWarp;
  // Row widths rounded up to 4 floats, zero past the tensors' columns.
  static constexpr int kDimQK = simt_row_width(C::kDimQK), kDimV = simt_row_width(C::kDimV);
  static constexpr int kDqChunk = simt_chunk(C::kDimQK, C::kHeadChunks);
  // K is read one row per lane (S) and by columns (dS·K): an odd stride and
  // room for the chunk's columns past Dqk, which stay zero.
  static constexpr int kKCols = odd_stride(kDqChunk * C::kHeadChunks);  // >= Dqk
  static constexpr int kVStride = odd_stride(kDimV);

  struct SharedStorage {
    float q[kBlockM * kDimQK];        // [kBlockM][Dqk rounded up to 4]
    float grad_o[kBlockM * kDimV];    // [kBlockM][Dv rounded up to 4]
    float k[kSimtBlockN * kKCols];    // [32][Dqk], zero past Dqk
    float v[kSimtBlockN * kVStride];  // [32][Dv rounded up to 4]
    float lse_log2[kBlockM];
    float dterm[kBlockM];
  };

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const CtaTile tile = query_tile<kBlockM, C::kHeadChunks, false, C::kCausal>(p);
    const int head = tile.head, kv_head = tile.kv_head, batch = tile.batch, row0 = tile.row0;
    const float slope = alibi_slope_log2<C>(p, batch, head);
    const int chunk = tile.chunk;
    const int warp_local0 = warp * kSimtRowsPerWarp;
    const int warp_row0 = row0 + warp_local0;
    const int dq0 = chunk * kDqChunk;

    const float* q = head_slice<const float>(p.q, batch, head) + row0 * p.q.stride_seq;
    const float* grad_o =
        head_slice<const float>(p.grad_o, batch, head) + row0 * p.grad_o.stride_seq;
    const float* k = head_slice<const float>(p.k, batch, kv_head);
    const float* v = head_slice<const float>(p.v, batch, kv_head);

    const BlockRange key_blocks =
        key_blocks_for_rows<C, kSimtBlockN>(p, row0, kBlockM, batch, head);
    load_f32_tile<kBlockM, kDimQK, kDimQK, kThreads>(smem.q, q, p.q.stride_seq, p.q.stride_dim,
                                                     p.seq_q - row0, C::kDimQK, thread);
    load_f32_tile<kBlockM, kDimV, kDimV, kThreads>(smem.grad_o, grad_o, p.grad_o.stride_seq,
                                                   p.grad_o.stride_dim, p.seq_q - row0, C::kDimV,
                                                   thread);
    stage_query_rows_f32<C::kDimV, kBlockM, C::kWarps>(p, batch, head, row0, smem.dterm,
                                                    smem.lse_log2, chunk == 0, warp, lane);

    float dq[kSimtRowsPerWarp][kDqChunk / 32];
    zero_rows<kDqChunk>(dq);
    const float* q_warp = smem.q + warp_local0 * kDimQK;
    const float* grad_o_warp = smem.grad_o + warp_local0 * kDimV;

    for (int n_block = key_blocks.first; n_block < key_blocks.end; ++n_block) {
      const int key0 = n_block * kSimtBlockN;
      __syncthreads();  // every warp is done with the previous K and V (and the rows are in)
      load_f32_tile<kSimtBlockN, kKCols, kKCols, kThreads>(
          smem.k, k + key0 * p.k.stride_seq, p.k.stride_seq, p.k.stride_dim, p.seq_kv - key0,
          C::kDimQK, thread);
      load_f32_tile<kSimtBlockN, kDimV, kVStride, kThreads>(
          smem.v, v + key0 * p.v.stride_seq, p.v.stride_seq, p.v.stride_dim, p.seq_kv - key0,
          C::kDimV, thread);
      __syncthreads();

      float s[kSimtRowsPerWarp], dp[kSimtRowsPerWarp];
      dot_rows<kDimQK, kDimQK>(s, q_warp, smem.k + lane * kKCols);
      dot_rows<kDimV, kDimV>(dp, grad_o_warp, smem.v + lane * kVStride);
      const int key = key0 + lane;
#pragma unroll
      for (int r = 0; r < kSimtRowsPerWarp; ++r) {
        const int local = warp_local0 + r;
        const float l2 = smem.lse_log2[local];
        const float prob =
            visible<C>(p, batch, head, warp_row0 + r, key)
                ? exp2f(logit<C>(s[r], p) - alibi_bias<C>(slope, p, warp_row0 + r, key) - l2)
                : 0.0f;
        // The soft cap's slope finds the logit from P with ALiBi's bias put back.
        const float known =
            C::kSoftcap && C::kAlibi ? l2 + alibi_bias<C>(slope, p, warp_row0 + r, key) : l2;
        s[r] = prob * (dp[r] - smem.dterm[local]) * logit_slope<C>(prob, known, p);  // dS
      }
      accumulate_product<kDqChunk, kKCols>(dq, s, smem.k + dq0, lane);
    }

    float scale[kSimtRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kSimtRowsPerWarp; ++r) scale[r] = p.scale;
    float* out = head_slice<float>(p.grad_q, batch, head);
    store_rows<kDqChunk>(out, p.grad_q.stride_seq, p.grad_q.stride_dim, dq, scale, warp_row0,
                         p.seq_q, dq0, C::kDimQK, lane);
  }
};

}  // namespace flashgen_device
