// Forward kernel on Hopper's warpgroup MMA (sm_90a), for any contiguous rows
// (alignment classes 8, 4, 2 copied straight into the tiles, 1 staged) and
// up to 256 value columns per CTA, 288 where token rows widen the tile (a
// larger Dv is split across CTAs). Same
// algorithm as kernels/forward/mma_sync.cuh; what differs is who multiplies:
//
//   S = Q·Kᵀ   wgmma, Q and K read by the tensor cores from shared memory
//   P = exp2(S·scale·log2e − m)  in registers (online softmax, softmax/softmax.cuh)
//   O += P·V   wgmma, P from registers, V from shared memory (MN-major)
//
// Each warpgroup (4 warps) owns 64 query rows; its accumulators have the
// m16n8k16 C layout per warp, so masking, softmax and the stores are shared
// with the mma.sync forward. K and V have kStages stages each (two by
// default): K[j+kStages-1] and V[j+kStages-2] stream in while S(j) = Q·K[j]ᵀ
// and P(j-1)·V[j-1] run, and the softmax of S(j) overlaps P(j-1)·V[j-1] on
// the tensor cores.
#pragma once

#include "common.cuh"
#include "copy/tile_copy.cuh"
#include "epilogue/store.cuh"
#include "softmax/mask.cuh"
#include "softmax/softmax.cuh"
#include "arch/warp_gemm.cuh"
#include "arch/wgmma.cuh"
#include "kernels/forward/wgmma_steps.cuh"
#include "pipeline/gemm_turns.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated) provides: kElement, kDimQK, kDimV, kWarps (a multiple of 4),
// kHeadChunks (CTAs splitting the value columns, each recomputing S),
// kBlockN, kCausal, kVec (8, 4, 2: cp.async straight into the tiles; 1: the
// aligned chunks around each row are staged and shifted into the tiles),
// kStages (2, 3 or 4; 2 when staged: one staging area), kTma (K and V tiles
// in the layout TMA writes: kernels/forward/wgmma_producer.cuh with copy=tma),
// kPersistent (that kernel's tile walk: a second Q tile).
template <class C>
struct ForwardWgmma : ForwardWgmmaSteps<C> {
  typedef ForwardWgmmaSteps<C> Steps;
  using Steps::E, Steps::kBlockN, Steps::kDimQK, Steps::kDimV, Steps::kScoreTiles;
  using Steps::kTmaLayout, Steps::kTokenRows, Steps::kChunkCols;
  using typename Steps::Keys, typename Steps::Values;
  using Steps::scores, Steps::accumulate_output, Steps::block_softmax;
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr int kBlockM = C::kWarps * 16;
  static constexpr int kStages = C::kStages;
  static constexpr int kOutTiles = kDimV / 8;
  static_assert(C::kWarps % 4 == 0, "whole warpgroups");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "wgmma n is 16..256");
  static_assert(kDimV <= kForwardMostValueColumns, "O in registers: two products at most");
  static_assert(kStages >= 2 && kStages <= 4, "2 to 4 stages");

  // Alignment class 1 (rows only 2-byte aligned) without TMA: K and V go
  // through staging.
  static constexpr bool kStaged = C::kVec == 1 && !C::kTma;
  static_assert(!kStaged || kStages == 2, "one staging area: two stages");
  typedef TileCopy<kBlockN, kDimQK, 0, 1, kThreads, true> KCopy;
  typedef TileCopy<kBlockN, kDimV, 0, 1, kThreads, true> VCopy;

  // Q's tiles: the CTA's, and in a persistent walk the next tile's.
  static constexpr int kQueryBuffers = C::kPersistent ? 2 : 1;
  struct Tiles {
    u16 q[kQueryBuffers][kBlockM * kDimQK];  // [kBlockM][kDimQK], core-matrix layout (arch/wgmma.cuh)
    u16 k[kStages][kBlockN * kDimQK];  // [kBlockN][kDimQK]
    u16 v[kStages][kBlockN * kDimV];   // [kBlockN][kDimV]
  };
  typedef WithStaging<Tiles, KCopy, VCopy, kStaged> SharedStorage;  // staging (class 1): K, V

  // What one CTA works on: a block of query rows of one head, the key/value
  // head they attend to, and one chunk of the value columns.
  struct Work {
    int batch, head, kv_head, chunk, dv0, row0;
    int n_blocks;    // key blocks to traverse (fewer under a diagonal mask)
    int first_key;   // the first key of the first of them
    int value_cols;  // columns of this CTA's chunk that exist
    // Token rows: where the head's columns start in the K and V tiles (and
    // so in Q's tile and O's accumulators); 0 elsewhere.
    int key_shift, value_shift;
    // TMA's coordinates of key 0: its row and batch in the maps (packed
    // sequences: the sequence's first row of the packed tensors, batch 0).
    int tma_key_row0, tma_batch;
    const u16* q;    // first row of the block
    const u16* k;    // key row 0
    const u16* v;    // key row 0, first column of the chunk
  };

  static __device__ __forceinline__ Work work_of(const AttentionParams& p) {
    return work_at(p, query_tile<kBlockM, C::kHeadChunks, false, C::kCausal>(p));
  }
  // Tile `tile` of a persistent walk (scheduler/cta_tile.cuh).
  static __device__ __forceinline__ Work walked_work(const AttentionParams& p, unsigned tile) {
    return work_at(p, walked_query_tile<kBlockM, C::kCausal>(p, tile));
  }
  static __device__ __forceinline__ Work work_at(const AttentionParams& p, const CtaTile& tile) {
    Work w;
    w.head = tile.head;
    w.batch = tile.batch;
    w.chunk = tile.chunk;
    w.dv0 = w.chunk * kChunkCols;
    w.row0 = tile.row0;
    const int kv_head = tile.kv_head;
    w.kv_head = kv_head;
    w.q = head_slice<const u16>(p.q, w.batch, w.head) + w.row0 * p.q.stride_seq;
    w.k = head_slice<const u16>(p.k, w.batch, kv_head);
    w.v = head_slice<const u16>(p.v, w.batch, kv_head) + w.dv0 * p.v.stride_dim;
    // (token rows: at most the chunk's, whose tile holds a few more)
    w.value_cols = kTokenRows ? min_of(C::kDimV - w.dv0, kChunkCols) : C::kDimV - w.dv0;
    // The columns' offsets past the 32-byte boundaries TMA copies from (key
    // and value rows start 16-byte aligned in a token-row view; whole 32-byte
    // sectors keep the L2 reads as few as on aligned rows).
    w.key_shift = kTokenRows ? kv_head * C::kDimQK % kTokenRowAlign : 0;
    w.value_shift = kTokenRows ? (kv_head * C::kDimV + w.dv0) % kTokenRowAlign : 0;
    w.tma_key_row0 = C::kVarlen ? p.sequence_kv_row0 : 0;
    w.tma_batch = C::kVarlen ? 0 : w.batch;
    const BlockRange blocks = key_blocks_for_rows<C, kBlockN>(p, w.row0, kBlockM, w.batch, w.head);
    w.n_blocks = blocks.count();
    w.first_key = blocks.first * kBlockN;
    return w;
  }

  // The CTA's block of Q into its core-matrix tile, by kCopyThreads threads:
  // cp.async, or (alignment class 1) aligned loads shifted in registers, or
  // (token rows) shifted as K's columns are.
  template <int kCopyThreads>
  static __device__ __forceinline__ void copy_queries(u16* tile, const AttentionParams& p,
                                                      const Work& w, int thread) {
    if constexpr (kTokenRows)
      load_tile_shifted<kBlockM, kDimQK, kCopyThreads>(tile, w.q, p.q.stride_seq,
                                                       p.seq_q - w.row0, C::kDimQK, w.key_shift,
                                                       thread);
    else if constexpr (C::kVec == 1)
      load_tile<kBlockM, kDimQK, 0, 1, kCopyThreads, true>(tile, w.q, p.q.stride_seq,
                                                           p.q.stride_dim, p.seq_q - w.row0,
                                                           C::kDimQK, thread);
    else
      copy_core_matrix_tile<kBlockM, kDimQK, C::kVec, kCopyThreads>(
          tile, w.q, p.q.stride_seq, p.seq_q - w.row0, C::kDimQK, thread);
  }

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const int group = warp / 4;  // warpgroup
    const Work w = work_of(p);
    const int warp_row0 = w.row0 + warp * 16;  // warpgroup rows 64·group, warp rows 16·(warp % 4)
    const u16 *k = w.k, *v = w.v;
    const int value_cols = w.value_cols, n_blocks = w.n_blocks;
    const int first_key = w.first_key;

    // Copy groups: G(j) = {K[j+kStages-1], V[j+kStages-2]}, issued at the top
    // of iteration j into the stages iterations j-1 and j-2 finished reading,
    // and waited for at the top of iteration j+kStages-1; the prologue issues
    // G(1-kStages) .. G(-1), the first with Q.
    copy_queries<kThreads>(smem.q[0], p, w, thread);
#pragma unroll
    for (int ahead = 0; ahead < kStages - 1; ++ahead)
      load_ahead(smem, k, v, p, ahead, n_blocks, first_key, value_cols, thread);

    float o[1][kOutTiles][4];
    OnlineSoftmax<1> softmax;

    // Descriptors: K-major Q and K (core matrices 128 bytes apart along K,
    // kDimQK·16 along M/N); MN-major V (kDimV·16 along K, 128 along N).
    const u64 q_desc = matrix_descriptor(smem.q[0] + group * 64 * kDimQK, 128, kDimQK * 16);

    attend(
        p, n_blocks, first_key, 0, score_site<C>(p, w.batch, w.head), q_desc, smem.k, smem.v,
        o, softmax, warp_row0, lane,
        [&](int n_block) {
          wait_and_load(smem, k, v, p, n_block, n_blocks, first_key, value_cols, thread);
        },
        [](int) {}, [](int) {},
        [&] {
          cp_async_wait<0>();
          if constexpr (kStaged) {
            __syncthreads();
            land_staged(smem, k, v, p, n_blocks, n_blocks, first_key, value_cols, thread);
          }
          fence_async_shared();
          __syncthreads();  // V[n-1] has landed for all
        });
    store_outputs(p, w, o, softmax, warp_row0, lane);
  }

  // The key-block loop of one warpgroup over n_blocks blocks from first_key
  // (site: the CTA's batch, head and ALiBi slope), for any way of filling
  // the stages. The stages count blocks from block0 (the blocks a persistent
  // walk's earlier tiles traversed; 0 otherwise): the tile's block j is
  // block0 + j of the pipeline, in stage (block0 + j) % kStages, and the
  // callbacks take that number. acquire(j) returns once K[j] and V[j-1] are
  // in their stages (it may issue further copies), release_keys(j) is called
  // once this warp no longer reads K[j] (S(j) is done), release(j) once it no
  // longer reads block j's stage (K[j] and V[j]; the last block's only in a
  // persistent walk, whose producer refills it), acquire_last() returns once
  // V[n-1] is in its stage. Turns: the order of the warpgroups' GEMMs
  // (GemmTurns).
  template <class Turns = GemmTurns<1, false>, class Acquire, class ReleaseKeys, class Release,
            class AcquireLast>
  static __device__ __forceinline__ void attend(const AttentionParams& p, int n_blocks,
                                                int first_key, int block0, const ScoreSite& site,
                                                u64 q_desc,
                                                const u16 (&k_tiles)[kStages][kBlockN * kDimQK],
                                                const u16 (&v_tiles)[kStages][kBlockN * kDimV],
                                                float (&o)[1][kOutTiles][4],
                                                OnlineSoftmax<1>& softmax, int warp_row0, int lane,
                                                Acquire acquire, ReleaseKeys release_keys,
                                                Release release, AcquireLast acquire_last) {
    zero(o);
    float(&o_flat)[kDimV / 2] = flat(o);
    softmax.init();
    u32 p_frag[kBlockN / 16][1][4];  // P of the previous block as A fragments

    // Block j: S(j) = Q·K[j]ᵀ and O += P(j-1)·V[j-1] go to the tensor cores
    // together, and the softmax of S(j) runs while the second one does.
    // Blocks 0 (no P·V yet) and n (only P·V) are peeled off the loop, so no
    // wgmma sits in a branch.
    if (n_blocks > 0) {
      acquire(block0);
      float s[1][kScoreTiles][4];
      Turns::take();
      wgmma_fence();
      scores(s, q_desc, k_tiles[block0 % kStages]);
      wgmma_commit();
      Turns::pass();
      wgmma_wait<0>();
      fence_registers(flat(s));
      release_keys(block0);
      float correction[1][2];
      block_softmax(s, correction, softmax, p, first_key, warp_row0, lane, site);
#pragma unroll
      for (int ks = 0; ks < kBlockN / 16; ++ks) pack_a_from_acc<E>(p_frag[ks], s, ks);
    }
    for (int n_block = 1; n_block < n_blocks; ++n_block) {
      const int block = block0 + n_block;
      acquire(block);
      float s[1][kScoreTiles][4];
      fence_registers(o_flat);
      Turns::take();
      wgmma_fence();
      scores(s, q_desc, k_tiles[block % kStages]);
      wgmma_commit();
      accumulate_output(o_flat, p_frag, v_tiles[(block - 1) % kStages]);
      wgmma_commit();
      Turns::pass();
      wgmma_wait<1>();  // S(j) is done; P(j-1)·V[j-1] may still run
      fence_registers(flat(s));
      release_keys(block);
      float correction[1][2];
      block_softmax(s, correction, softmax, p, first_key + n_block * kBlockN, warp_row0, lane,
                    site);
      wgmma_wait<0>();  // O holds blocks < j, and the P fragments are free
      fence_registers(o_flat);
      release(block - 1);
      scale_rows(o, correction);
#pragma unroll
      for (int ks = 0; ks < kBlockN / 16; ++ks) pack_a_from_acc<E>(p_frag[ks], s, ks);
    }
    if (n_blocks > 0) {
      acquire_last();
      fence_registers(o_flat);
      Turns::take();
      wgmma_fence();
      accumulate_output(o_flat, p_frag, v_tiles[(block0 + n_blocks - 1) % kStages]);
      wgmma_commit();
      Turns::pass();
      wgmma_wait<0>();
      fence_registers(o_flat);
      if constexpr (C::kPersistent) release(block0 + n_blocks - 1);
    }
  }

  // Normalises O and writes this warp's 16 rows of it, and of LSE (first
  // value chunk only).
  static __device__ __forceinline__ void store_outputs(const AttentionParams& p, const Work& w,
                                                       const float (&o)[1][kOutTiles][4],
                                                       OnlineSoftmax<1>& softmax, int warp_row0,
                                                       int lane) {
    float inverse_sum[1][2], lse[1][2];
    softmax.template finish<C::kSinks>(inverse_sum, lse, sink_log2<C>(p, w.head));
    store_acc_tile<E, C::kVec>(
        head_slice<u16>(p.o, w.batch, w.head) + warp_row0 * p.o.stride_seq + w.dv0 * p.o.stride_dim,
        p.o.stride_seq, p.o.stride_dim, o, inverse_sum, p.seq_q - warp_row0, w.value_cols, lane,
        w.value_shift);
    if (w.chunk == 0) store_lse_rows<1>(p, w.batch, w.head, warp_row0, lse, lane);
  }

  // Waits for copy group G(j+1-kStages) (K[j], V[j-1]), then issues G(j)
  // (staged: into the staging areas, shifted into their stages at the top of
  // iteration j+1).
  static __device__ __forceinline__ void wait_and_load(SharedStorage& smem, const u16* k,
                                                       const u16* v, const AttentionParams& p,
                                                       int n_block, int n_blocks, int first_key,
                                                       int value_cols, int thread) {
    cp_async_wait<kStages - 2>();
    if constexpr (kStaged) {
      __syncthreads();  // the staged chunks are visible to every thread
      land_staged(smem, k, v, p, n_block, n_blocks, first_key, value_cols, thread);
    }
    fence_async_shared();
    __syncthreads();
    load_ahead(smem, k, v, p, n_block + kStages - 1, n_blocks, first_key, value_cols, thread);
  }

  // Issues and commits copy group G(ahead + 1 - kStages) = {K[ahead], V[ahead-1]}:
  // K[ahead] into stage ahead % kStages, which block ahead - kStages was read
  // from, and V[ahead-1] likewise (blocks past the last are not copied).
  static __device__ __forceinline__ void load_ahead(SharedStorage& smem, const u16* k,
                                                    const u16* v, const AttentionParams& p,
                                                    int ahead, int n_blocks, int first_key,
                                                    int value_cols, int thread) {
    if (ahead < n_blocks)
      load_keys(smem, ahead % kStages, k, p, first_key + ahead * kBlockN, thread);
    if (ahead >= 1 && ahead - 1 < n_blocks)
      load_values(smem, (ahead - 1) % kStages, v, p, first_key + (ahead - 1) * kBlockN,
                  value_cols, thread);
    cp_async_commit();
  }

  // Shifts the staged K[j] and V[j-1] (copy group G(j-1)) into their stages.
  static __device__ __forceinline__ void land_staged(SharedStorage& smem, const u16* k,
                                                     const u16* v, const AttentionParams& p,
                                                     int n_block, int n_blocks, int first_key,
                                                     int value_cols, int thread) {
    if constexpr (kStaged) {
      const int key0 = first_key + n_block * kBlockN;
      if (n_block < n_blocks)
        KCopy::finish(smem.k[n_block % kStages], smem.first_staging(), k + key0 * p.k.stride_seq,
                      p.k.stride_seq, p.seq_kv - key0, C::kDimQK, thread);
      if (n_block > 0)
        VCopy::finish(smem.v[(n_block - 1) % kStages], smem.second_staging(),
                      v + (key0 - kBlockN) * p.v.stride_seq, p.v.stride_seq,
                      p.seq_kv - (key0 - kBlockN), value_cols, thread);
    }
  }

  // Issue the cp.async copies of K (or V) rows [key0, key0 + kBlockN) into
  // `stage` (staged: into the staging area).
  static __device__ __forceinline__ void load_keys(SharedStorage& smem, int stage, const u16* k,
                                                   const AttentionParams& p, int key0,
                                                   int thread) {
    if constexpr (kStaged)
      KCopy::issue(smem.k[stage], smem.first_staging(), k + key0 * p.k.stride_seq, p.k.stride_seq,
                   p.k.stride_dim, p.seq_kv - key0, C::kDimQK, thread);
    else
      copy_core_matrix_tile<kBlockN, kDimQK, C::kVec, kThreads>(
          smem.k[stage], k + key0 * p.k.stride_seq, p.k.stride_seq, p.seq_kv - key0, C::kDimQK,
          thread);
  }
  static __device__ __forceinline__ void load_values(SharedStorage& smem, int stage, const u16* v,
                                                     const AttentionParams& p, int key0,
                                                     int value_cols, int thread) {
    if constexpr (kStaged)
      VCopy::issue(smem.v[stage], smem.second_staging(), v + key0 * p.v.stride_seq, p.v.stride_seq,
                   p.v.stride_dim, p.seq_kv - key0, value_cols, thread);
    else
      copy_core_matrix_tile<kBlockN, kDimV, C::kVec, kThreads>(
          smem.v[stage], v + key0 * p.v.stride_seq, p.v.stride_seq, p.seq_kv - key0, value_cols,
          thread);
  }
};

}  // namespace flashgen_device
