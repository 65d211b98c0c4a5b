// Forward kernel: one CTA owns a block of query rows (and one chunk of the
// value dimension) and traverses key/value blocks with an online softmax.
//
//   S = Q·Kᵀ            (tensor cores, fp32 accumulate)
//   P = exp2(S·scale·log2e − m), m the running row max (log2 domain)
//   O = O·correction + P·V
//
// Pipeline: K[j] and V[j] have one shared buffer each; V[j] loads while S is
// computed, and K[j+1] loads while P·V runs.
#pragma once

#include "common.cuh"
#include "copy/cache_rows.cuh"
#include "copy/quantized_cache.cuh"
#include "copy/tile_copy.cuh"
#include "epilogue/store.cuh"
#include "softmax/mask.cuh"
#include "arch/mma.cuh"
#include "softmax/softmax.cuh"
#include "arch/warp_gemm.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated) provides: kElement, kDimQK, kDimV, kWarps, kRowTiles (16-row
// tiles per warp), kBlockN, kHeadChunks (CTAs splitting the value columns),
// kVec (alignment class in elements), kCausal, kCacheQ (Q fragments held in
// registers rather than re-read from shared memory every key block),
// kSplitKeys (the CTAs of a query block share its key blocks and write fp32
// partial results for the combine kernel: decode, where the query blocks
// alone cannot fill the GPU), kKeyCache / kPagedCache / kFp8Cache
// (split-key only: K and V are a KV cache read in place,
// copy/cache_rows.cuh; of e4m3 bytes, copy/quantized_cache.cuh).
template <class C>
struct Forward {
  static constexpr int E = C::kElement;
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr int kRowTiles = C::kRowTiles;
  static constexpr int kBlockM = C::kWarps * 16 * kRowTiles;
  static constexpr int kBlockN = C::kBlockN;
  static constexpr int kDimQK = round_up(C::kDimQK, 16);  // the k of S = Q·Kᵀ, zero-filled
  static constexpr int kDvChunk = chunk_width(C::kDimV, C::kHeadChunks);  // value columns per CTA
  static constexpr int kKSteps = kDimQK / 16;
  static constexpr int kScoreTiles = kBlockN / 8;   // n-tiles of S
  static constexpr int kOutTiles = kDvChunk / 8;    // n-tiles of O
  // +8 elements (16 bytes) per row: the 8 rows one ldmatrix reads fall in
  // distinct bank groups.
  static constexpr int kQKStride = kDimQK + 8;
  static constexpr int kVStride = kDvChunk + 8;
  static_assert(kBlockN % 16 == 0 && kDvChunk % 16 == 0, "tiles are whole 16x16 blocks");

  // An fp8 cache's tiles are converted on their way in (copy/quantized_cache.cuh).
  typedef typename select_type<
      C::kFp8Cache, QuantizedCacheCopy<kBlockN, kDimQK, kQKStride, kThreads, E, C::kVec == 0>,
      TileCopy<kBlockN, kDimQK, kQKStride, C::kVec, kThreads>>::type KCopy;
  typedef typename select_type<
      C::kFp8Cache, QuantizedCacheCopy<kBlockN, kDvChunk, kVStride, kThreads, E, C::kVec == 0>,
      TileCopy<kBlockN, kDvChunk, kVStride, C::kVec, kThreads>>::type VCopy;
  static constexpr bool kStaged = KCopy::kStaged;

  struct Tiles {
    u16 q[kBlockM * kQKStride];  // [kBlockM][kDimQK]
    u16 k[kBlockN * kQKStride];  // [kBlockN][kDimQK]
    u16 v[kBlockN * kVStride];   // [kBlockN][kDvChunk]
  };
  typedef WithStaging<Tiles, KCopy, VCopy> SharedStorage;  // staging: K, then V

  static_assert(C::kSplitKeys || !C::kKeyCache, "a KV cache is read by the split-key forward");
  static_assert(C::kKeyCache || !C::kFp8Cache, "fp8 is a KV cache's storage");

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    const CtaTile tile = query_tile<kBlockM, C::kHeadChunks, C::kSplitKeys, C::kCausal>(p);
    if constexpr (C::kKeyCache) {
      // The entry's own count of keys; its appended rows into the cache.
      const AttentionParams sequence = sequence_params(p, tile.batch);
      if (appends_rows(p, tile))
        append_to_cache<C>(sequence, tile.batch, tile.kv_head, threadIdx.x, kThreads);
      run_tile(sequence, tile, shared_bytes);
    } else {
      run_tile(p, tile, shared_bytes);
    }
  }

  static __device__ __forceinline__ void run_tile(const AttentionParams& p, const CtaTile& tile,
                                                  unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const int head = tile.head, kv_head = tile.kv_head, batch = tile.batch, row0 = tile.row0;
    const int chunk = tile.chunk;
    const int warp_row0 = row0 + warp * 16 * kRowTiles;
    const int dv0 = chunk * kDvChunk;

    const u16* q = head_slice<const u16>(p.q, batch, head) + row0 * p.q.stride_seq;
    const auto keys = traversed_rows<C, false>(p, batch, kv_head, 0);
    const auto values = traversed_rows<C, true>(p, batch, kv_head, dv0);

    const BlockRange share = key_block_share<C::kSplitKeys>(
        p, key_blocks_for_rows<C, kBlockN>(p, row0, kBlockM, batch, head), tile.split);
    const int first_block = share.first, n_blocks = share.end;
    const ScoreSite site = score_site<C>(p, batch, head);

    load_tile<kBlockM, kDimQK, kQKStride, C::kVec, kThreads>(
        smem.q, q, p.q.stride_seq, p.q.stride_dim, p.seq_q - row0, C::kDimQK, thread);
    if (n_blocks > first_block) {
      const int first_key = first_block * kBlockN;
      KCopy::issue(smem.k, smem.first_staging(), keys.from(first_key), p.k.stride_dim,
                   p.seq_kv - first_key, C::kDimQK, thread);
    }
    cp_async_commit();

    float o[kRowTiles][kOutTiles][4];  // O accumulator: [row tile][dv n-tile][C fragment]
    zero(o);
    OnlineSoftmax<kRowTiles> softmax;
    softmax.init();

    // Q fragments kept in registers when the tuning says so.
    u32 q_frag[C::kCacheQ ? kKSteps : 1][kRowTiles][4];  // [k step][row tile][A fragment]
    const u16* q_warp = smem.q + (warp * 16 * kRowTiles) * kQKStride;

    for (int n_block = first_block; n_block < n_blocks; ++n_block) {
      const int key0 = n_block * kBlockN;
      // V[j] streams in while S = Q·K[j]ᵀ is computed.
      VCopy::issue(smem.v, smem.second_staging(), values.from(key0), p.v.stride_dim,
                   p.seq_kv - key0, C::kDimV - dv0, thread);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
      if (kStaged) {
        KCopy::finish(smem.k, smem.first_staging(), keys.from(key0), p.seq_kv - key0, C::kDimQK,
                      thread);
        __syncthreads();
      }

      if (C::kCacheQ && n_block == first_block) {
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks)
          load_a_rows(q_frag[C::kCacheQ ? ks : 0], q_warp, kQKStride, ks * 16, lane);
      }

      // S = Q·Kᵀ: [row tile][key n-tile][C fragment]
      float s[kRowTiles][kScoreTiles][4];
      zero(s);
      if (C::kCacheQ) {
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks)
          mma_k_step<E, false>(s, q_frag[C::kCacheQ ? ks : 0], smem.k, kQKStride, ks * 16, lane);
      } else {
        gemm_smem_nk<E, kRowTiles, kScoreTiles, kKSteps>(s, q_warp, kQKStride, smem.k, kQKStride,
                                                         lane);
      }

      logits<C>(s, p, warp_row0, key0, lane, site);
      float correction[kRowTiles][2];
      softmax.update(s, correction);
      scale_rows(o, correction);

      cp_async_wait<0>();
      __syncthreads();  // V[j] is in, and every warp is done reading K[j]
      if (kStaged) {
        VCopy::finish(smem.v, smem.second_staging(), values.from(key0), p.seq_kv - key0,
                      C::kDimV - dv0, thread);
        __syncthreads();
      }
      if (n_block + 1 < n_blocks) {
        const int next = key0 + kBlockN;
        KCopy::issue(smem.k, smem.first_staging(), keys.from(next), p.k.stride_dim,
                     p.seq_kv - next, C::kDimQK, thread);
      }
      cp_async_commit();

      // O += P·V: P goes from the S accumulator layout straight into A fragments.
      gemm_acc_kn<E, kRowTiles, kOutTiles, kBlockN / 16>(o, s, smem.v, kVStride, lane);
      __syncthreads();  // every warp is done reading V[j] before it is overwritten
    }
    cp_async_wait<0>();

    float inverse_sum[kRowTiles][2], lse[kRowTiles][2];
    static_assert(!(C::kSplitKeys && C::kSinks), "a share's partial results hold no sink");
    softmax.template finish<C::kSinks>(inverse_sum, lse, sink_log2<C>(p, head));
    if (C::kSplitKeys) {
      store_partial_rows(p, tile.split, batch, head, warp_row0, dv0, o, inverse_sum,
                         p.seq_q - warp_row0, C::kDimV - dv0, lane);
      if (chunk == 0) store_partial_lse_rows(p, tile.split, batch, head, warp_row0, lse, lane);
    } else {
      store_rows<E, C::kVec>(p.o, batch, head, warp_row0, dv0, o, inverse_sum,
                             p.seq_q - warp_row0, C::kDimV - dv0, lane);
      if (chunk == 0) store_lse_rows(p, batch, head, warp_row0, lse, lane);
    }
  }
};

}  // namespace flashgen_device
