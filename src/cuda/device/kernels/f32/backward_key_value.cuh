// Backward, key/value side, for fp32 tensors on the CUDA cores
// (kernels/f32/simt.cuh): one CTA owns 8 keys per warp of one kv head (and one chunk
// of dK's and dV's columns) and traverses query blocks of 32 of every query
// head in its group, a lane per query. Four products, transposed so the
// CTA's keys are the rows:
//
//   Sᵀ  = K·Qᵀ,   Pᵀ = exp2(Sᵀ·scale·log2e − L2[query])
//   dPᵀ = V·dOᵀ
//   dV += Pᵀ·dO
//   dSᵀ = Pᵀ ∘ (dPᵀ − Dterm[query]),   dK += dSᵀ·Q   (dK = scale · Σ dSᵀ·Q)
//
// Dterm comes from the query kernel, which runs first. GQA sums over the
// group's query heads inside the CTA: no element is ever added by two CTAs.
#pragma once

#include "kernels/f32/simt.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated): kDimQK, kDimV, kWarps, kHeadChunks (CTAs splitting dK's and
// dV's columns), kCausal.
template <class C>
struct BackwardKeyValueF32 {
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr int kBlockM = C::kWarps * kSimtRowsPerWarp;  // keys per CTA
  // Row widths rounded up to 4 floats, zero past the tensors' columns.
  static constexpr int kDimQK = simt_row_width(C::kDimQK), kDimV = simt_row_width(C::kDimV);
  static constexpr int kDkChunk = simt_chunk(C::kDimQK, C::kHeadChunks);
  static constexpr int kDvChunk = simt_chunk(C::kDimV, C::kHeadChunks);
  // Q and dO are read one row per lane (Sᵀ, dPᵀ) and by columns (dSᵀ·Q,
  // Pᵀ·dO): odd strides, zero past Dqk and Dv up to the last chunk's end.
  static constexpr int kQCols = odd_stride(kDkChunk * C::kHeadChunks);
  static constexpr int kGradOCols = odd_stride(kDvChunk * C::kHeadChunks);

  struct SharedStorage {
    float k[kBlockM * kDimQK];                // [kBlockM][Dqk rounded up to 4]
    float v[kBlockM * kDimV];                 // [kBlockM][Dv rounded up to 4]
    float q[kSimtBlockN * kQCols];            // [32][Dqk], zero past Dqk
    float grad_o[kSimtBlockN * kGradOCols];   // [32][Dv], zero past Dv
    float lse_log2[kSimtBlockN];
    float dterm[kSimtBlockN];
  };

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const CtaTile tile = key_tile<kBlockM, C::kHeadChunks, C::kCausal>();
    const int kv_head = tile.head, batch = tile.batch, key0 = tile.row0;
    const int chunk = tile.chunk;
    const int warp_local0 = warp * kSimtRowsPerWarp;
    const int warp_key0 = key0 + warp_local0;
    const int dk0 = chunk * kDkChunk, dv0 = chunk * kDvChunk;

    const float* k = head_slice<const float>(p.k, batch, kv_head) + key0 * p.k.stride_seq;
    const float* v = head_slice<const float>(p.v, batch, kv_head) + key0 * p.v.stride_seq;
    load_f32_tile<kBlockM, kDimQK, kDimQK, kThreads>(smem.k, k, p.k.stride_seq, p.k.stride_dim,
                                                     p.seq_kv - key0, C::kDimQK, thread);
    load_f32_tile<kBlockM, kDimV, kDimV, kThreads>(smem.v, v, p.v.stride_seq, p.v.stride_dim,
                                                   p.seq_kv - key0, C::kDimV, thread);

    float dk[kSimtRowsPerWarp][kDkChunk / 32], dv[kSimtRowsPerWarp][kDvChunk / 32];
    zero_rows<kDkChunk>(dk);
    zero_rows<kDvChunk>(dv);
    const float* k_warp = smem.k + warp_local0 * kDimQK;
    const float* v_warp = smem.v + warp_local0 * kDimV;

    const BlockRange query_blocks =
        query_blocks_for_keys<C, kSimtBlockN>(p, key0, kBlockM, batch, kv_head);

    for (int g = 0; g < p.group_size; ++g) {
      const int head = kv_head * p.group_size + g;
      const float slope = alibi_slope_log2<C>(p, batch, head);
      const float* q = head_slice<const float>(p.q, batch, head);
      const float* grad_o = head_slice<const float>(p.grad_o, batch, head);
      for (int m_block = query_blocks.first; m_block < query_blocks.end; ++m_block) {
        const int query0 = m_block * kSimtBlockN;
        __syncthreads();  // every warp is done with the previous Q and dO (and K, V are in)
        load_f32_tile<kSimtBlockN, kQCols, kQCols, kThreads>(
            smem.q, q + query0 * p.q.stride_seq, p.q.stride_seq, p.q.stride_dim,
            p.seq_q - query0, C::kDimQK, thread);
        load_f32_tile<kSimtBlockN, kGradOCols, kGradOCols, kThreads>(
            smem.grad_o, grad_o + query0 * p.grad_o.stride_seq, p.grad_o.stride_seq,
            p.grad_o.stride_dim, p.seq_q - query0, C::kDimV, thread);
        stage_traversed_rows<kSimtBlockN>(p, batch, head, query0, smem.lse_log2, smem.dterm,
                                          thread, kThreads);
        __syncthreads();

        float st[kSimtRowsPerWarp], dpt[kSimtRowsPerWarp];
        dot_rows<kDimQK, kDimQK>(st, k_warp, smem.q + lane * kQCols);
        dot_rows<kDimV, kDimV>(dpt, v_warp, smem.grad_o + lane * kGradOCols);
        const int query = query0 + lane;
        const float l2 = smem.lse_log2[lane], dterm = smem.dterm[lane];
#pragma unroll
        for (int r = 0; r < kSimtRowsPerWarp; ++r) {
          st[r] = visible<C>(p, batch, head, query, warp_key0 + r)
                      ? exp2f(logit<C>(st[r], p) - alibi_bias<C>(slope, p, query, warp_key0 + r) -
                              l2)
                      : 0.0f;  // Pᵀ
          // The soft cap's slope finds the logit from Pᵀ with ALiBi's bias put back.
          const float known = C::kSoftcap && C::kAlibi
                                  ? l2 + alibi_bias<C>(slope, p, query, warp_key0 + r)
                                  : l2;
          dpt[r] = st[r] * (dpt[r] - dterm) * logit_slope<C>(st[r], known, p);  // dSᵀ
        }
        accumulate_product<kDvChunk, kGradOCols>(dv, st, smem.grad_o + dv0, lane);
        accumulate_product<kDkChunk, kQCols>(dk, dpt, smem.q + dk0, lane);
      }
    }

    float scale[kSimtRowsPerWarp], one[kSimtRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kSimtRowsPerWarp; ++r) {
      scale[r] = p.scale;
      one[r] = 1.0f;
    }
    float* grad_k = head_slice<float>(p.grad_k, batch, kv_head);
    float* grad_v = head_slice<float>(p.grad_v, batch, kv_head);
    store_rows<kDkChunk>(grad_k, p.grad_k.stride_seq, p.grad_k.stride_dim, dk, scale, warp_key0,
                         p.seq_kv, dk0, C::kDimQK, lane);
    store_rows<kDvChunk>(grad_v, p.grad_v.stride_seq, p.grad_v.stride_dim, dv, one, warp_key0,
                         p.seq_kv, dv0, C::kDimV, lane);
  }
};

}  // namespace flashgen_device
