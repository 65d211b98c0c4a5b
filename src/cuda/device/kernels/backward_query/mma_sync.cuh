// Backward, query side: one CTA owns a block of query rows (and one chunk of
// dQ's columns) and traverses key/value blocks, like the forward. Three GEMMs:
//
//   S  = Q·Kᵀ,  P = exp2(S·scale·log2e − L2)      (recomputed, L2 from the LSE)
//   dP = dO·Vᵀ
//   dS = P ∘ (dP − Dterm),  dQ += dS·K             (dQ = scale · Σ dS·K)
//
// It first computes Dterm = rowsum(dO ∘ O) for its rows and writes it for the
// key/value kernel, which runs next. No atomics: each dQ element has one owner.
#pragma once

#include "common.cuh"
#include "copy/tile_copy.cuh"
#include "epilogue/store.cuh"
#include "softmax/mask.cuh"
#include "softmax/row_stats.cuh"
#include "softmax/softmax.cuh"
#include "arch/warp_gemm.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated): kElement, kDimQK, kDimV, kWarps, kRowTiles, kBlockN,
// kHeadChunks (CTAs splitting dQ's columns), kVec, kCausal.
template <class C>
struct BackwardQuery {
  static constexpr int E = C::kElement;
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr int kRowTiles = C::kRowTiles;
  static constexpr int kBlockM = C::kWarps * 16 * kRowTiles;  // query rows per CTA
  static constexpr int kBlockN = C::kBlockN;                   // key rows per iteration
  static constexpr int kDqChunk = chunk_width(C::kDimQK, C::kHeadChunks);
  static constexpr int kDimQK = kDqChunk * C::kHeadChunks;  // zero-filled past Dqk
  static constexpr int kDimV = round_up(C::kDimV, 16);
  static constexpr int kQKStride = kDimQK + 8;
  static constexpr int kVStride = kDimV + 8;
  static constexpr int kKeyTiles = kBlockN / 8;

  typedef TileCopy<kBlockN, kDimQK, kQKStride, C::kVec, kThreads> KCopy;
  typedef TileCopy<kBlockN, kDimV, kVStride, C::kVec, kThreads> VCopy;
  static constexpr bool kStaged = KCopy::kStaged;

  struct Tiles {
    u16 q[kBlockM * kQKStride];       // [kBlockM][kDimQK]
    u16 grad_o[kBlockM * kVStride];   // [kBlockM][kDimV]
    u16 k[kBlockN * kQKStride];       // [kBlockN][kDimQK]
    u16 v[kBlockN * kVStride];        // [kBlockN][kDimV]
    float lse_log2[kBlockM];
    float dterm[kBlockM];
  };
  typedef WithStaging<Tiles, KCopy, VCopy> SharedStorage;  // staging: K, then V

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const CtaTile tile = query_tile<kBlockM, C::kHeadChunks, false, C::kCausal>(p);
    const int head = tile.head, kv_head = tile.kv_head, batch = tile.batch, row0 = tile.row0;
    const int chunk = tile.chunk;
    const int warp_local0 = warp * 16 * kRowTiles;  // first row of the warp within the CTA
    const int warp_row0 = row0 + warp_local0;
    const int dq0 = chunk * kDqChunk;

    const u16* q = head_slice<const u16>(p.q, batch, head) + row0 * p.q.stride_seq;
    const u16* grad_o = head_slice<const u16>(p.grad_o, batch, head) + row0 * p.grad_o.stride_seq;
    const u16* o = head_slice<const u16>(p.o, batch, head) + row0 * p.o.stride_seq;
    const u16* k = head_slice<const u16>(p.k, batch, kv_head);
    const u16* v = head_slice<const u16>(p.v, batch, kv_head);

    const BlockRange key_blocks = key_blocks_for_rows<C, kBlockN>(p, row0, kBlockM, batch, head);
    const ScoreSite site = score_site<C>(p, batch, head);

    const int valid_rows = p.seq_q - row0;
    load_tile<kBlockM, kDimQK, kQKStride, C::kVec, kThreads>(smem.q, q, p.q.stride_seq,
                                                             p.q.stride_dim, valid_rows,
                                                             C::kDimQK, thread);
    load_tile<kBlockM, kDimV, kVStride, C::kVec, kThreads>(smem.grad_o, grad_o,
                                                           p.grad_o.stride_seq,
                                                           p.grad_o.stride_dim, valid_rows,
                                                           C::kDimV, thread);
    if (key_blocks.count() > 0) load_key_value(p, smem, k, v, key_blocks.first * kBlockN, thread);
    cp_async_commit();

    // Dterm and L2 of the CTA's rows (while the tiles stream in).
    stage_query_rows<E, C::kDimV, kBlockM, C::kWarps>(p, batch, head, row0, grad_o, o, smem.dterm,
                                                      smem.lse_log2, chunk == 0, warp, lane);
    __syncthreads();
    float l2_of_row[kRowTiles][2], dterm_of_row[kRowTiles][2];  // of the thread's two rows per tile
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp_local0 + rt * 16 + (lane >> 2) + 8 * h;
        l2_of_row[rt][h] = smem.lse_log2[r];
        dterm_of_row[rt][h] = smem.dterm[r];
      }

    float dq[kRowTiles][kDqChunk / 8][4];  // [row tile][dQ n-tile][C fragment]
    zero(dq);
    const u16* q_warp = smem.q + warp_local0 * kQKStride;
    const u16* grad_o_warp = smem.grad_o + warp_local0 * kVStride;

    for (int n_block = key_blocks.first; n_block < key_blocks.end; ++n_block) {
      const int key0 = n_block * kBlockN;
      cp_async_wait<0>();
      __syncthreads();
      if (kStaged) {
        KCopy::finish(smem.k, smem.first_staging(), k + key0 * p.k.stride_seq, p.k.stride_seq,
                      p.seq_kv - key0, C::kDimQK, thread);
        VCopy::finish(smem.v, smem.second_staging(), v + key0 * p.v.stride_seq, p.v.stride_seq,
                      p.seq_kv - key0, C::kDimV, thread);
        __syncthreads();
      }

      // S = Q·Kᵀ, then P = exp2(S·scale·log2e − L2): [row tile][key n-tile][C fragment]
      float s[kRowTiles][kKeyTiles][4];
      zero(s);
      gemm_smem_nk<E, kRowTiles, kKeyTiles, kDimQK / 16>(s, q_warp, kQKStride, smem.k,
                                                         kQKStride, lane);
      logits<C>(s, p, warp_row0, key0, lane, site);
      exp2_rows(s, l2_of_row);

      // dP = dO·Vᵀ
      float dp[kRowTiles][kKeyTiles][4];
      zero(dp);
      gemm_smem_nk<E, kRowTiles, kKeyTiles, kDimV / 16>(dp, grad_o_warp, kVStride, smem.v,
                                                        kVStride, lane);
      // dS = P ∘ (dP − Dterm), kept in dp.
      subtract_rows_times<C>(dp, s, l2_of_row, dterm_of_row, p,
                             AlibiBias<C, false>(p, warp_row0, key0, lane, site));

      // dQ += dS·K (this chunk's columns of K)
      gemm_acc_kn<E, kRowTiles, kDqChunk / 8, kBlockN / 16>(dq, dp, smem.k + dq0, kQKStride,
                                                            lane);
      __syncthreads();  // every warp is done with K[j] and V[j]
      if (n_block + 1 < key_blocks.end) load_key_value(p, smem, k, v, key0 + kBlockN, thread);
      cp_async_commit();
    }
    cp_async_wait<0>();

    float scale[kRowTiles][2];
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) scale[rt][0] = scale[rt][1] = p.scale;
    store_acc_tile<E, C::kVec>(head_slice<u16>(p.grad_q, batch, head) +
                                   warp_row0 * p.grad_q.stride_seq + dq0 * p.grad_q.stride_dim,
                               p.grad_q.stride_seq, p.grad_q.stride_dim, dq, scale,
                               p.seq_q - warp_row0, C::kDimQK - dq0, lane);
  }

  static __device__ __forceinline__ void load_key_value(const AttentionParams& p,
                                                        SharedStorage& smem, const u16* k,
                                                        const u16* v, int key0, int thread) {
    KCopy::issue(smem.k, smem.first_staging(), k + key0 * p.k.stride_seq, p.k.stride_seq,
                 p.k.stride_dim, p.seq_kv - key0, C::kDimQK, thread);
    VCopy::issue(smem.v, smem.second_staging(), v + key0 * p.v.stride_seq, p.v.stride_seq,
                 p.v.stride_dim, p.seq_kv - key0, C::kDimV, thread);
  }
};

}  // namespace flashgen_device
