// Query backward on Hopper's warpgroup MMA (sm_90a), for contiguous rows
// (aligned to 4 bytes or more: copied straight into the tiles; 2-byte aligned:
// K and V staged and shifted into them, Q and dO shifted in registers) and
// Dqk <= 256 (dQ stays in registers). Same algorithm as
// kernels/backward_query/mma_sync.cuh (Dterm first, no atomics); each warpgroup owns 64 query
// rows:
//
//   S  = Q·Kᵀ      wgmma, Q and K from shared memory (both K-major)
//   dP = dO·Vᵀ     wgmma, dO and V from shared memory (both K-major)
//   P, dS          registers (exp2_rows, subtract_rows_times)
//   dQ += dS·K     wgmma, dS from registers, K read MN-major
//
// K has three stages (block j+1 loads while S(j) reads K[j] and the dQ product
// of block j-1 reads K[j-1]), V two. The dS side of block j overlaps the dQ
// product of block j-1 on the tensor cores.
#pragma once

#include "common.cuh"
#include "copy/tile_copy.cuh"
#include "epilogue/store.cuh"
#include "softmax/mask.cuh"
#include "softmax/row_stats.cuh"
#include "softmax/softmax.cuh"
#include "arch/warp_gemm.cuh"
#include "arch/wgmma.cuh"
#include "arch/wgmma_gemm.cuh"
#include "layout/shared_memory.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// The tiles of the query wgmma kernels (this one and the producer's): the
// CTA's Q and dO rows, K and V of the traversed blocks in stages, and the
// rows' L2 and Dterm.
template <int kBlockM, int kBlockN, int kDimQK, int kDimV, int kKeyStages, int kValueStages>
struct QueryWgmmaTiles {
  u16 q[kBlockM * kDimQK];  // core-matrix layout (arch/wgmma.cuh)
  u16 grad_o[kBlockM * kDimV];
  u16 k[kKeyStages][kBlockN * kDimQK];
  u16 v[kValueStages][kBlockN * kDimV];
  float lse_log2[kBlockM];
  float dterm[kBlockM];
};

// C (generated): kElement, kDimQK, kDimV, kWarps (a multiple of 4), kBlockN,
// kVec (8, 4, 2 or 1), kCausal, kTma (K and V tiles in the layout TMA
// writes: kernels/backward_query/wgmma_producer.cuh with copy=tma).
template <class C>
struct BackwardQueryWgmma {
  static constexpr int E = C::kElement;
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr int kBlockM = C::kWarps * 16;  // query rows per CTA
  static constexpr int kBlockN = C::kBlockN;      // key rows per traversed block
  // TMA on rows that are not 16-byte aligned (token-row views:
  // wgmma_producer.cuh): the tiles hold a head's columns shifted past the
  // 32-byte boundary before them, so they are wider.
  static constexpr bool kTokenRows = C::kTma && C::kVec < 8;
  static constexpr int kDimQK =
      kTokenRows ? token_row_tile_width(C::kDimQK, C::kVec) : round_up(C::kDimQK, 16);
  static constexpr int kDimV =
      kTokenRows ? token_row_tile_width(C::kDimV, C::kVec) : round_up(C::kDimV, 16);
  static constexpr int kKeyStages = 3, kValueStages = 2;
  static constexpr int kKeyTiles = kBlockN / 8;
  static_assert(C::kWarps % 4 == 0, "whole warpgroups");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256 && kDimQK <= 256,
                "wgmma n is 16..256; dQ lives in registers");
  // K and V stages in the layout their copies write (TraversedTile: TMA's
  // slices or swizzled panels, or the cp.async core-matrix layout).
  static constexpr bool kTmaLayout = C::kTma;
  typedef TraversedTile<kBlockN, kDimQK, kTmaLayout, C::kSwizzle> Keys;
  typedef TraversedTile<kBlockN, kDimV, kTmaLayout, C::kSwizzle> Values;

  // Alignment class 1 (rows only 2-byte aligned) without TMA: K and V go
  // through staging.
  static constexpr bool kStaged = C::kVec == 1 && !C::kTma;
  typedef TileCopy<kBlockN, kDimQK, 0, 1, kThreads, true> KCopy;
  typedef TileCopy<kBlockN, kDimV, 0, 1, kThreads, true> VCopy;

  typedef QueryWgmmaTiles<kBlockM, kBlockN, kDimQK, kDimV, kKeyStages, kValueStages> Tiles;
  typedef WithStaging<Tiles, KCopy, VCopy, kStaged> SharedStorage;  // staging (class 1): K, V

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const int group = warp / 4;
    const CtaTile tile = query_tile<kBlockM, 1, false, C::kCausal>(p);
    const int head = tile.head, kv_head = tile.kv_head, batch = tile.batch, row0 = tile.row0;
    const int warp_row0 = row0 + warp * 16;

    const u16* q = head_slice<const u16>(p.q, batch, head) + row0 * p.q.stride_seq;
    const u16* grad_o = head_slice<const u16>(p.grad_o, batch, head) + row0 * p.grad_o.stride_seq;
    const u16* o = head_slice<const u16>(p.o, batch, head) + row0 * p.o.stride_seq;
    const u16* k = head_slice<const u16>(p.k, batch, kv_head);
    const u16* v = head_slice<const u16>(p.v, batch, kv_head);

    const BlockRange blocks = key_blocks(p, row0, batch, head);
    const int n_blocks = blocks.count(), first_key = blocks.first * kBlockN;

    if constexpr (kStaged) {  // once per CTA: aligned loads shifted in registers
      load_tile<kBlockM, kDimQK, 0, 1, kThreads, true>(smem.q, q, p.q.stride_seq, p.q.stride_dim,
                                                       p.seq_q - row0, C::kDimQK, thread);
      load_tile<kBlockM, kDimV, 0, 1, kThreads, true>(smem.grad_o, grad_o, p.grad_o.stride_seq,
                                                      p.grad_o.stride_dim, p.seq_q - row0,
                                                      C::kDimV, thread);
    } else {
      copy_core_matrix_tile<kBlockM, kDimQK, C::kVec, kThreads>(smem.q, q, p.q.stride_seq,
                                                                p.seq_q - row0, C::kDimQK, thread);
      copy_core_matrix_tile<kBlockM, kDimV, C::kVec, kThreads>(
          smem.grad_o, grad_o, p.grad_o.stride_seq, p.seq_q - row0, C::kDimV, thread);
    }
    if (n_blocks > 0) load_block(smem, 0, first_key, k, v, p, thread);
    cp_async_commit();
    // Dterm and L2 of the CTA's rows while the tiles stream in.
    stage_query_rows<E, C::kDimV, kBlockM, C::kWarps>(p, batch, head, row0, grad_o, o, smem.dterm,
                                                      smem.lse_log2, true, warp, lane);

    float dq[1][kDimQK / 8][4];
    // K-major Q and dO for this warpgroup's 64 rows (the A operands of S, dP).
    const u64 q_desc = matrix_descriptor(smem.q + group * 64 * kDimQK, 128, kDimQK * 16);
    const u64 grad_o_desc = matrix_descriptor(smem.grad_o + group * 64 * kDimV, 128, kDimV * 16);
    // wait_and_load's barrier also orders the row stats before their first read.
    traverse(
        p, n_blocks, first_key, score_site<C>(p, batch, head), q_desc, grad_o_desc,
        smem.lse_log2, smem.dterm, dq, warp, warp_row0, lane, [&](int j) { wait_and_load(smem, first_key, k, v, p, j, n_blocks, thread); },
        [](int) {}, [&](int j) -> const u16* { return smem.k[j % kKeyStages]; },
        [&](int j) -> const u16* { return smem.v[j % kValueStages]; });
    cp_async_wait<0>();
    store_grad_q(p, batch, head, warp_row0, dq, lane);
  }

  // The key-block loop of one warpgroup over n_blocks blocks from first_key
  // (site: the CTA's batch, head and ALiBi slope), for any way of filling
  // the stages:
  // acquire(j) returns once K[j] and V[j] are in their stages (it may issue
  // further copies) and the rows' L2 and Dterm are in place, release(j) once
  // this warp no longer reads block j's stages; key_tile(j) and value_tile(j)
  // are those stages.
  template <class Acquire, class Release, class KeyTile,
            class ValueTile>
  static __device__ __forceinline__ void traverse(
      const AttentionParams& p, int n_blocks, int first_key, const ScoreSite& site, u64 q_desc,
      u64 grad_o_desc,
      const float* lse_log2_rows, const float* dterm_rows, float (&dq)[1][kDimQK / 8][4],
      int warp, int warp_row0, int lane, Acquire acquire, Release release, KeyTile key_tile,
      ValueTile value_tile) {
    zero(dq);
    u32 ds_frag[kBlockN / 16][1][4];  // dS of block j-1 as A fragments
    float l2_of_row[1][2], dterm_of_row[1][2];

    // Block j: S(j), dP(j) and dQ += dS(j-1)·K[j-1] go to the tensor cores
    // together. Blocks 0 and n are peeled off, so no wgmma sits in a branch.
    if (n_blocks > 0) {
      acquire(0);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp * 16 + (lane >> 2) + 8 * h;
        l2_of_row[0][h] = lse_log2_rows[r];
        dterm_of_row[0][h] = dterm_rows[r];
      }
      float s[1][kKeyTiles][4], dp[1][kKeyTiles][4];
      wgmma_fence();
      scores(s, dp, q_desc, grad_o_desc, key_tile(0), value_tile(0));
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(s));
      fence_registers(flat(dp));
      query_side(s, dp, l2_of_row, dterm_of_row, p, first_key, warp_row0, lane, site);
      pack(ds_frag, dp);
    }
    for (int n_block = 1; n_block < n_blocks; ++n_block) {
      acquire(n_block);
      float s[1][kKeyTiles][4], dp[1][kKeyTiles][4];
      fence_registers(flat(dq));
      wgmma_fence();
      scores(s, dp, q_desc, grad_o_desc, key_tile(n_block), value_tile(n_block));
      wgmma_commit();
      grad_q_product(dq, ds_frag, key_tile(n_block - 1));
      wgmma_commit();
      wgmma_wait<1>();  // S(j) and dP(j) are done; dQ += dS(j-1)·K[j-1] may still run
      fence_registers(flat(s));
      fence_registers(flat(dp));
      query_side(s, dp, l2_of_row, dterm_of_row, p, first_key + n_block * kBlockN, warp_row0,
                 lane, site);
      wgmma_wait<0>();  // the dS fragments of block j-1 are free
      fence_registers(flat(dq));
      release(n_block - 1);
      pack(ds_frag, dp);
    }
    if (n_blocks > 0) {
      fence_registers(flat(dq));
      wgmma_fence();
      grad_q_product(dq, ds_frag, key_tile(n_blocks - 1));
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(dq));
    }
  }

  // Key blocks the CTA whose queries of (batch, head) start at row0
  // traverses (fewer under a mask).
  static __device__ __forceinline__ BlockRange key_blocks(const AttentionParams& p, int row0,
                                                          int batch, int head) {
    return key_blocks_for_rows<C, kBlockN>(p, row0, kBlockM, batch, head);
  }

  // Writes this warp's 16 rows of dQ (times the softmax scale); token rows:
  // its columns start at K's shift.
  static __device__ __forceinline__ void store_grad_q(const AttentionParams& p, int batch,
                                                      int head, int warp_row0,
                                                      const float (&dq)[1][kDimQK / 8][4],
                                                      int lane, int key_shift = 0) {
    store_rows_times<E, C::kVec>(p.grad_q, batch, head, warp_row0, 0, dq, p.scale,
                                 p.seq_q - warp_row0, C::kDimQK, lane, key_shift);
  }


  // Waits for block j (issued one iteration earlier; block 0 is at first_key),
  // then issues block j+1
  // into the stages that iteration j-1 finished reading (K[j-2], V[j-1]);
  // staged: block j is shifted from the staging areas into its stages first,
  // and block j+1 goes to the staging areas.
  static __device__ __forceinline__ void wait_and_load(SharedStorage& smem, int first_key,
                                                       const u16* k, const u16* v,
                                                       const AttentionParams& p, int n_block,
                                                       int n_blocks, int thread) {
    cp_async_wait<0>();
    if constexpr (kStaged) {
      __syncthreads();  // the staged chunks are visible to every thread
      const int key0 = first_key + n_block * kBlockN;
      KCopy::finish(smem.k[n_block % kKeyStages], smem.first_staging(),
                    k + key0 * p.k.stride_seq, p.k.stride_seq, p.seq_kv - key0, C::kDimQK, thread);
      VCopy::finish(smem.v[n_block % kValueStages], smem.second_staging(),
                    v + key0 * p.v.stride_seq, p.v.stride_seq, p.seq_kv - key0, C::kDimV, thread);
    }
    fence_async_shared();
    __syncthreads();
    if (n_block + 1 < n_blocks) load_block(smem, n_block + 1, first_key, k, v, p, thread);
    cp_async_commit();
  }

  // Issues the copies of K and V rows of key block j (block 0 at first_key)
  // into their stages (staged: into the staging areas).
  static __device__ __forceinline__ void load_block(SharedStorage& smem, int j, int first_key,
                                                    const u16* k, const u16* v,
                                                    const AttentionParams& p, int thread) {
    const int key0 = first_key + j * kBlockN;
    if constexpr (kStaged) {
      KCopy::issue(smem.k[j % kKeyStages], smem.first_staging(), k + key0 * p.k.stride_seq,
                   p.k.stride_seq, p.k.stride_dim, p.seq_kv - key0, C::kDimQK, thread);
      VCopy::issue(smem.v[j % kValueStages], smem.second_staging(), v + key0 * p.v.stride_seq,
                   p.v.stride_seq, p.v.stride_dim, p.seq_kv - key0, C::kDimV, thread);
    } else {
      copy_core_matrix_tile<kBlockN, kDimQK, C::kVec, kThreads>(
          smem.k[j % kKeyStages], k + key0 * p.k.stride_seq, p.k.stride_seq, p.seq_kv - key0,
          C::kDimQK, thread);
      copy_core_matrix_tile<kBlockN, kDimV, C::kVec, kThreads>(
          smem.v[j % kValueStages], v + key0 * p.v.stride_seq, p.v.stride_seq, p.seq_kv - key0,
          C::kDimV, thread);
    }
  }

  // Issues S = Q·Kᵀ and dP = dO·Vᵀ for the tiles of one key block (overwriting s, dp).
  static __device__ __forceinline__ void scores(float (&s)[1][kKeyTiles][4],
                                                float (&dp)[1][kKeyTiles][4], u64 q_desc,
                                                u64 grad_o_desc, const u16* k_tile,
                                                const u16* v_tile) {
    // K and V read K-major.
    const u64 k_desc = Keys::k_major(k_tile), v_desc = Values::k_major(v_tile);
    gemm_shared<E, kDimQK / 16, Keys::kKMajorStep>(flat(s), q_desc, k_desc);  // A (Q, dO) steps 256 bytes
    gemm_shared<E, kDimV / 16, Values::kKMajorStep>(flat(dp), grad_o_desc, v_desc);
  }

  // Issues dQ += dS·K for the K tile of the previous block (read MN-major).
  static __device__ __forceinline__ void grad_q_product(float (&dq)[1][kDimQK / 8][4],
                                                        const u32 (&ds_frag)[kBlockN / 16][1][4],
                                                        const u16* k_tile) {
    const u64 k_desc = Keys::mn_major(k_tile);
    gemm_accumulate<E, Keys::kMnMajorStep>(flat(dq), ds_frag, k_desc);
  }

  // P = exp2(S·scale·log2e − L2) (masked) in s, dS = P ∘ (dP − Dterm) in dp.
  static __device__ __forceinline__ void query_side(float (&s)[1][kKeyTiles][4],
                                                    float (&dp)[1][kKeyTiles][4],
                                                    const float (&l2_of_row)[1][2],
                                                    const float (&dterm_of_row)[1][2],
                                                    const AttentionParams& p, int key0,
                                                    int warp_row0, int lane,
                                                    const ScoreSite& site) {
    logits<C>(s, p, warp_row0, key0, lane, site);
    exp2_rows(s, l2_of_row);
    subtract_rows_times<C>(dp, s, l2_of_row, dterm_of_row, p,
                           AlibiBias<C, false>(p, warp_row0, key0, lane, site));
  }

  static __device__ __forceinline__ void pack(u32 (&ds_frag)[kBlockN / 16][1][4],
                                              const float (&ds)[1][kKeyTiles][4]) {
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) pack_a_from_acc<E>(ds_frag[ks], ds, ks);
  }
};

}  // namespace flashgen_device
