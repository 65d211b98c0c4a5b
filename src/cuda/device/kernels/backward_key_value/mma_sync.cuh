// Backward, key/value side: one CTA owns a block of key rows of one kv head
// (and one chunk of dK's and dV's columns) and traverses query blocks of every
// query head in its group. Four GEMMs, all in the transposed orientation so
// the CTA's keys are the MMA rows:
//
//   Sᵀ  = K·Qᵀ,   Pᵀ = exp2(Sᵀ·scale·log2e − L2[query])
//   dPᵀ = V·dOᵀ
//   dV += Pᵀ·dO
//   dSᵀ = Pᵀ ∘ (dPᵀ − Dterm[query]),   dK += dSᵀ·Q   (dK = scale · Σ dSᵀ·Q)
//
// Dterm comes from the query kernel, which runs first. GQA sums over the
// group's query heads inside the CTA: no element is ever added by two CTAs.
#pragma once

#include "common.cuh"
#include "copy/tile_copy.cuh"
#include "epilogue/store.cuh"
#include "softmax/mask.cuh"
#include "kernels/row_kernels.cuh"
#include "softmax/row_stats.cuh"
#include "softmax/softmax.cuh"
#include "arch/warp_gemm.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated): kElement, kDimQK, kDimV, kWarps, kRowTiles, kBlockN,
// kHeadChunks (CTAs splitting dK's and dV's columns), kVec, kCausal.
// kAtomicGradQ: also add this block's dQ = dS·K into the fp32 accumulator
// with atomics (the classic 5-GEMM backward; not deterministic).
template <class C, bool kAtomicGradQ = false>
struct BackwardKeyValue {
  static constexpr int E = C::kElement;
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr int kRowTiles = C::kRowTiles;
  static constexpr int kBlockM = C::kWarps * 16 * kRowTiles;  // key rows per CTA
  static constexpr int kBlockN = C::kBlockN;                   // query rows per iteration
  static constexpr int kDkChunk = chunk_width(C::kDimQK, C::kHeadChunks);
  static constexpr int kDvChunk = chunk_width(C::kDimV, C::kHeadChunks);
  static constexpr int kDimQK = kDkChunk * C::kHeadChunks;  // zero-filled past Dqk
  static constexpr int kDimV = kDvChunk * C::kHeadChunks;   // zero-filled past Dv
  static constexpr int kQKStride = kDimQK + 8;
  static constexpr int kVStride = kDimV + 8;
  static constexpr int kQueryTiles = kBlockN / 8;

  static constexpr int kDsStride = kBlockN + 8;

  typedef TileCopy<kBlockN, kDimQK, kQKStride, C::kVec, kThreads> QCopy;
  typedef TileCopy<kBlockN, kDimV, kVStride, C::kVec, kThreads> GradOCopy;
  static constexpr bool kStaged = QCopy::kStaged;

  struct Tiles {
    u16 k[kBlockM * kQKStride];       // [kBlockM][kDimQK]
    u16 v[kBlockM * kVStride];        // [kBlockM][kDimV]
    u16 q[kBlockN * kQKStride];       // [kBlockN][kDimQK]
    u16 grad_o[kBlockN * kVStride];   // [kBlockN][kDimV]
    float lse_log2[kBlockN];
    float dterm[kBlockN];
  };
  typedef WithStaging<Tiles, QCopy, GradOCopy> TileStorage;  // staging: Q, then dO
  struct AtomicStorage : TileStorage {
    u16 ds[kBlockM * kDsStride];  // dSᵀ [kBlockM][kBlockN], read back as dS
  };
  typedef typename select_type<kAtomicGradQ, AtomicStorage, TileStorage>::type SharedStorage;

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const CtaTile tile = key_tile<kBlockM, C::kHeadChunks, C::kCausal>();
    const int kv_head = tile.head, batch = tile.batch, key0 = tile.row0;
    const int chunk = tile.chunk;
    const int warp_local0 = warp * 16 * kRowTiles;
    const int warp_key0 = key0 + warp_local0;
    const int dk0 = chunk * kDkChunk, dv0 = chunk * kDvChunk;

    const u16* k = head_slice<const u16>(p.k, batch, kv_head) + key0 * p.k.stride_seq;
    const u16* v = head_slice<const u16>(p.v, batch, kv_head) + key0 * p.v.stride_seq;
    load_tile<kBlockM, kDimQK, kQKStride, C::kVec, kThreads>(
        smem.k, k, p.k.stride_seq, p.k.stride_dim, p.seq_kv - key0, C::kDimQK, thread);
    load_tile<kBlockM, kDimV, kVStride, C::kVec, kThreads>(
        smem.v, v, p.v.stride_seq, p.v.stride_dim, p.seq_kv - key0, C::kDimV, thread);
    cp_async_commit();

    float dk[kRowTiles][kDkChunk / 8][4];  // [row tile][dK n-tile][C fragment]
    float dv[kRowTiles][kDvChunk / 8][4];  // [row tile][dV n-tile][C fragment]
    zero(dk);
    zero(dv);
    const u16* k_warp = smem.k + warp_local0 * kQKStride;
    const u16* v_warp = smem.v + warp_local0 * kVStride;

    const BlockRange query_blocks =
        query_blocks_for_keys<C, kBlockN>(p, key0, kBlockM, batch, kv_head);

    for (int g = 0; g < p.group_size; ++g) {
      const int head = kv_head * p.group_size + g;
      const ScoreSite site = score_site<C>(p, batch, head);
      const u16* q = head_slice<const u16>(p.q, batch, head);
      const u16* grad_o = head_slice<const u16>(p.grad_o, batch, head);
      for (int m_block = query_blocks.first; m_block < query_blocks.end; ++m_block) {
        const int query0 = m_block * kBlockN;
        __syncthreads();  // every warp is done with the previous Q and dO tiles
        QCopy::issue(smem.q, smem.first_staging(), q + query0 * p.q.stride_seq, p.q.stride_seq,
                     p.q.stride_dim, p.seq_q - query0, C::kDimQK, thread);
        GradOCopy::issue(smem.grad_o, smem.second_staging(),
                         grad_o + query0 * p.grad_o.stride_seq, p.grad_o.stride_seq,
                         p.grad_o.stride_dim, p.seq_q - query0, C::kDimV, thread);
        cp_async_commit();
        stage_traversed_rows<kBlockN>(p, batch, head, query0, smem.lse_log2, smem.dterm, thread,
                                      kThreads);
        cp_async_wait<0>();
        __syncthreads();
        if (kStaged) {
          QCopy::finish(smem.q, smem.first_staging(), q + query0 * p.q.stride_seq, p.q.stride_seq,
                        p.seq_q - query0, C::kDimQK, thread);
          GradOCopy::finish(smem.grad_o, smem.second_staging(),
                            grad_o + query0 * p.grad_o.stride_seq, p.grad_o.stride_seq,
                            p.seq_q - query0, C::kDimV, thread);
          __syncthreads();
        }

        // Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ·scale·log2e − L2): [key tile][query n-tile][C fragment]
        float st[kRowTiles][kQueryTiles][4];
        zero(st);
        gemm_smem_nk<E, kRowTiles, kQueryTiles, kDimQK / 16>(st, k_warp, kQKStride, smem.q,
                                                             kQKStride, lane);
        logits_transposed<C>(st, p, warp_key0, query0, lane, site);
        exp2_columns(st, smem.lse_log2, lane);

        // dPᵀ = V·dOᵀ
        float dpt[kRowTiles][kQueryTiles][4];
        zero(dpt);
        gemm_smem_nk<E, kRowTiles, kQueryTiles, kDimV / 16>(dpt, v_warp, kVStride,
                                                            smem.grad_o, kVStride, lane);
        // dV += Pᵀ·dO (this chunk's columns)
        gemm_acc_kn<E, kRowTiles, kDvChunk / 8, kBlockN / 16>(dv, st, smem.grad_o + dv0,
                                                              kVStride, lane);
        // dSᵀ = Pᵀ ∘ (dPᵀ − Dterm), kept in dpt; dK += dSᵀ·Q
        subtract_columns_times<C>(dpt, st, smem.lse_log2, smem.dterm, p, lane,
                                  AlibiBias<C, true>(p, warp_key0, query0, lane, site));
        gemm_acc_kn<E, kRowTiles, kDkChunk / 8, kBlockN / 16>(dk, dpt, smem.q + dk0, kQKStride,
                                                              lane);
        if constexpr (kAtomicGradQ) {
          store_acc_shared(smem.ds + warp_local0 * kDsStride, dpt, lane);
          __syncthreads();
          add_grad_q(p, smem, batch, head, query0, dk0, warp, lane);
        }
      }
    }

    const int valid_keys = p.seq_kv - warp_key0;
    float ones[kRowTiles][2], scale[kRowTiles][2];
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      ones[rt][0] = ones[rt][1] = 1.0f;
      scale[rt][0] = scale[rt][1] = p.scale;
    }
    store_acc_tile<E, C::kVec>(head_slice<u16>(p.grad_v, batch, kv_head) +
                                   warp_key0 * p.grad_v.stride_seq + dv0 * p.grad_v.stride_dim,
                               p.grad_v.stride_seq, p.grad_v.stride_dim, dv, ones, valid_keys,
                               C::kDimV - dv0, lane);
    store_acc_tile<E, C::kVec>(head_slice<u16>(p.grad_k, batch, kv_head) +
                                   warp_key0 * p.grad_k.stride_seq + dk0 * p.grad_k.stride_dim,
                               p.grad_k.stride_seq, p.grad_k.stride_dim, dk, scale, valid_keys,
                               C::kDimQK - dk0, lane);
  }

  // A warp's fp32 fragments to a [rows][kDsStride] shared tile in the element type.
  static __device__ __forceinline__ void store_acc_shared(
      u16* tile, const float (&acc)[kRowTiles][kQueryTiles][4], int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int nt = 0; nt < kQueryTiles; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<u32*>(tile + (rt * 16 + g + 8 * h) * kDsStride + nt * 8 + 2 * t) =
              pack2<E>(acc[rt][nt][2 * h], acc[rt][nt][2 * h + 1]);
  }

  // dQ[query0.., dk0..] += dS·K for this CTA's keys, with fp32 atomics. The
  // CTA's warps share (16-query tile, column group) items.
  static __device__ __forceinline__ void add_grad_q(const AttentionParams& p,
                                                    const SharedStorage& smem, int batch, int head,
                                                    int query0, int dk0, int warp, int lane) {
    constexpr int kQueryTiles16 = kBlockN / 16;
    constexpr int kItemCols = kDkChunk % 32 == 0 ? 32 : 16;  // 16 accumulators: no spills
    constexpr int kItems = kQueryTiles16 * (kDkChunk / kItemCols);
    const int g = lane >> 2, t = lane & 3;
    for (int item = warp; item < kItems; item += C::kWarps) {
      const int qt = item % kQueryTiles16, col0 = dk0 + (item / kQueryTiles16) * kItemCols;
      float acc[1][kItemCols / 8][4];  // [query tile][dQ n-tile][C fragment]
      zero(acc);
#pragma unroll
      for (int ks = 0; ks < kBlockM / 16; ++ks) {
        u32 a[1][4];
        load_a_fragment_km(a[0], smem.ds + ks * 16 * kDsStride + qt * 16, kDsStride, lane);
        mma_k_step<E, true>(acc, a, smem.k + col0, kQKStride, ks * 16, lane);
      }
#pragma unroll
      for (int nt = 0; nt < kItemCols / 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int query = query0 + qt * 16 + g + (i >= 2 ? 8 : 0);
          const int col = col0 + nt * 8 + 2 * t + (i & 1);
          if (query < p.seq_q && col < C::kDimQK)
            atomic_add(grad_q_accum_row(p, batch, head, query) + col, acc[0][nt][i]);
        }
    }
  }
};

template <class C>
using BackwardAtomic = BackwardKeyValue<C, true>;

}  // namespace flashgen_device
