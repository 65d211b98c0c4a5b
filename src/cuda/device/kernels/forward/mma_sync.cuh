// Forward kernel: one CTA owns a block of query rows (and one chunk of the
// value dimension) and traverses key/value blocks with an online softmax.
//
//   S = Q·Kᵀ            (tensor cores, fp32 accumulate)
//   P = exp2(S·scale·log2e − m), m the running row max (log2 domain)
//   O = O·correction + P·V
//
// Pipeline: by default K[j] and V[j] have one shared buffer each; V[j]
// loads while S is computed, and K[j+1] loads while P·V runs. With kStages
// (2 to 4) the blocks' K and V go round a ring of that many stages, copies
// running kStages - 1 blocks ahead: decode, whose CTAs are few warps, has
// that many blocks' bytes in flight rather than one tile's.
#pragma once

#include "common.cuh"
#include "copy/cache_rows.cuh"
#include "copy/quantized_cache.cuh"
#include "copy/tile_copy.cuh"
#include "epilogue/store.cuh"
#include "layout/shared_memory.cuh"
#include "softmax/mask.cuh"
#include "arch/mma.cuh"
#include "softmax/key_split_merge.cuh"
#include "softmax/softmax.cuh"
#include "arch/warp_gemm.cuh"
#include "arch/warp_gemm_e4m3.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated) provides: kElement, kDimQK, kDimV, kWarps, kRowTiles (16-row
// tiles per warp), kBlockN, kHeadChunks (CTAs splitting the value columns),
// kVec (alignment class in elements), kCausal, kCacheQ (Q fragments held in
// registers rather than re-read from shared memory every key block),
// kStages (0: the two buffers; 2 to 4: the ring), kKeySplit (the warps
// share one 16-row tile and split each key block: each warp keeps its own
// softmax and output over its keys, merged into warp 0's at the end;
// decode's few rows take four warps without four copies of its GEMMs),
// kSplitKeys (the CTAs of a query block share its key blocks and write fp32
// partial results for the combine kernel: decode, where the query blocks
// alone cannot fill the GPU), kKeyCache / kPagedCache / kFp8Cache
// (split-key only: K and V are a KV cache read in place,
// copy/cache_rows.cuh; of e4m3 bytes, copy/quantized_cache.cuh).
template <class C>
struct Forward {
  static constexpr int E = C::kElement;
  // The GEMMs' element type: over an fp8 cache f16, whatever E is (its
  // values convert to f16 exactly, one instruction a pair, and Q's tile is
  // made f16 at a power-of-two scale: q_tile_to_f16).
  static constexpr int kMmaE = C::kFp8Cache ? int(kF16) : E;
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr int kRowTiles = C::kRowTiles;
  static constexpr bool kKeySplit = C::kKeySplit;
  static constexpr int kRowWarps = kKeySplit ? 1 : C::kWarps;  // warps over distinct rows
  static constexpr int kBlockM = kRowWarps * 16 * kRowTiles;
  static constexpr int kBlockN = C::kBlockN;
  static constexpr int kWarpKeys = kKeySplit ? kBlockN / C::kWarps : kBlockN;  // a warp's keys
  static constexpr int kDimQK = round_up(C::kDimQK, 16);  // the k of S = Q·Kᵀ, zero-filled
  static constexpr int kDvChunk = chunk_width(C::kDimV, C::kHeadChunks);  // value columns per CTA
  static constexpr int kKSteps = kDimQK / 16;
  static constexpr int kScoreTiles = kWarpKeys / 8;  // n-tiles of a warp's S
  static constexpr int kOutTiles = kDvChunk / 8;    // n-tiles of O
  // +8 elements (16 bytes) per row: the 8 rows one ldmatrix reads fall in
  // distinct bank groups.
  static constexpr int kQKStride = kDimQK + 8;
  static constexpr int kVStride = kDvChunk + 8;
  static_assert(kWarpKeys % 16 == 0 && kDvChunk % 16 == 0, "tiles are whole 16x16 blocks");

  static constexpr bool kRing = C::kStages >= 2;
  static constexpr int kStages = kRing ? C::kStages : 1;
  // Warps that split the keys in a ring each copy (and convert) their own
  // keys of every block and wait for them alone (__syncwarp): they run
  // apart, each through its own stages, with no barrier of the CTA in the
  // loop. Otherwise the CTA's threads copy each block together.
  static constexpr bool kWarpCopies = kKeySplit && kRing;
  static constexpr int kCopyRows = kWarpCopies ? kWarpKeys : kBlockN;
  static constexpr int kCopyThreads = kWarpCopies ? 32 : kThreads;

  // An fp8 cache whose rows are 8-byte aligned and whole 16-column chunks is
  // read as its bytes, converted on their way into the fragments
  // (arch/warp_gemm_e4m3.cuh); other fp8 caches are converted into 16-bit
  // tiles first (QuantizedCacheCopy::finish).
  static constexpr bool kE4m3Fragments =
      e4m3_fragments(C::kFp8Cache, C::kVec, C::kDimQK, C::kDimV);

  // The copies of [rows][cols] tiles: an fp8 cache's staged (and converted,
  // copy/quantized_cache.cuh).
  template <int kRows, int kCols, int kStride, int kBy>
  using TileCopyOf = typename select_type<
      C::kFp8Cache,
      typename select_type<kE4m3Fragments, E4m3RowCopy<kRows, kCols, kBy, E>,
                           QuantizedCacheCopy<kRows, kCols, kStride, kBy, E, C::kVec == 0>>::type,
      TileCopy<kRows, kCols, kStride, C::kVec, kBy>>::type;
  typedef TileCopyOf<kCopyRows, kDimQK, kQKStride, kCopyThreads> KCopy;
  typedef TileCopyOf<kCopyRows, kDvChunk, kVStride, kCopyThreads> VCopy;
  static constexpr bool kStaged = KCopy::kStaged;
  // The e4m3 staging's row strides, in bytes.
  static constexpr int kKeyRowBytes = E4m3StageRowBytes<KCopy, kE4m3Fragments>::value;
  static constexpr int kValueRowBytes = E4m3StageRowBytes<VCopy, kE4m3Fragments>::value;
  // A whole block's copies: the staging each stage holds (a warp's copies
  // take their share of it, in warp order).
  typedef TileCopyOf<kBlockN, kDimQK, kQKStride, kThreads> KBlockCopy;
  typedef TileCopyOf<kBlockN, kDvChunk, kVStride, kThreads> VBlockCopy;
  static_assert(!kWarpCopies || (C::kWarps * KCopy::kStageElements <= KBlockCopy::kStageElements &&
                                 C::kWarps * VCopy::kStageElements <= VBlockCopy::kStageElements),
                "the warps' staging fits the block's");
  // Staged copies land in their stage's staging and are converted into the
  // one K and V tile just before they are read: the ring is the staging's.
  // e4m3 fragments are read from the staging itself: no K and V tiles (a
  // 16-byte placeholder each).
  static constexpr int kTileStages = kStaged ? 1 : kStages;
  static constexpr int kKTile = kE4m3Fragments ? kE4m3TilePlaceholder : kBlockN * kQKStride;
  static constexpr int kVTile = kE4m3Fragments ? kE4m3TilePlaceholder : kBlockN * kVStride;

  struct Tiles {
    u16 q[kBlockM * kQKStride];   // [kBlockM][kDimQK]
    u16 k[kTileStages][kKTile];   // [kBlockN][kDimQK]
    u16 v[kTileStages][kVTile];   // [kBlockN][kDvChunk]
  };
  // staging: K's stages, then V's
  typedef WithStaging<Tiles, KBlockCopy, VBlockCopy, kStaged, kStages> SharedStorage;
  // kKeySplit: the warps' results merge through the K and V tiles' shared
  // memory (e4m3 fragments: the staging's), read by no one any more by then.
  typedef KeySplitMerge<C::kWarps, kRowTiles, kOutTiles> Merge;
  static constexpr int kStagingBytes =  // of 16-bit elements
      2 * kStages * (KBlockCopy::kStageElements + VBlockCopy::kStageElements);
  static_assert(!kKeySplit || Merge::kBytes <= (kE4m3Fragments
                                                    ? kStagingBytes
                                                    : sizeof(Tiles::k) + sizeof(Tiles::v)),
                "the warps' merge fits in the K and V tiles");
  static_assert(!kE4m3Fragments || (sizeof(Tiles) % 16 == 0 && kCopyRows % 16 == 0),
                "staged rows start 16-byte aligned (ldmatrix)");

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
    const int warp_rows = kKeySplit ? 0 : warp * 16 * kRowTiles;  // the warp's first, in the tile
    const int warp_row0 = row0 + warp_rows;
    const int warp_key = kKeySplit ? warp * kWarpKeys : 0;        // of each block
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
    if constexpr (kWarpCopies || C::kFp8Cache) {
      cp_async_commit();  // Q in before the warps part ways, or is made f16
      cp_async_wait<0>();
      __syncthreads();
    }
    // Over an fp8 cache the scores come back by Q's scale and the keys'
    // (the tiles hold the cache's e4m3 values themselves).
    float score_factor = 1.0f;
    if constexpr (C::kFp8Cache)
      score_factor = keys.scale *
                     q_tile_to_f16<E, kBlockM, kDimQK, kQKStride, kThreads>(smem.q, thread);

    float o[kRowTiles][kOutTiles][4];  // O accumulator: [row tile][dv n-tile][C fragment]
    zero(o);
    OnlineSoftmax<kRowTiles> softmax;
    softmax.init();

    // Q fragments kept in registers when the tuning says so.
    u32 q_frag[C::kCacheQ ? kKSteps : 1][kRowTiles][4];  // [k step][row tile][A fragment]
    const u16* q_warp = smem.q + warp_rows * kQKStride;

    // What this thread's copies cover: with kWarpCopies the warp's keys of
    // each block (its rows of the tiles, its share of the staging), else
    // the whole block.
    const int copy_row = kWarpCopies ? warp_key : 0;
    const int copier = kWarpCopies ? lane : thread;
    const int staging_share = kWarpCopies ? warp : 0;
    const auto k_tile = [&](int stage) { return smem.k[kStaged ? 0 : stage] + copy_row * kQKStride; };
    const auto v_tile = [&](int stage) { return smem.v[kStaged ? 0 : stage] + copy_row * kVStride; };
    const auto k_staging = [&](int stage) {
      return smem.first_staging(stage) + staging_share * KCopy::kStageElements;
    };
    const auto v_staging = [&](int stage) {
      return smem.second_staging(stage) + staging_share * VCopy::kStageElements;
    };
    // The copies of block `block`'s K or V into stage `stage`.
    const auto issue_keys = [&](int block, int stage) {
      const int key0 = block * kBlockN + copy_row;
      KCopy::issue(k_tile(stage), k_staging(stage), keys.from(key0), p.k.stride_dim,
                   p.seq_kv - key0, C::kDimQK, copier);
    };
    const auto issue_values = [&](int block, int stage) {
      const int key0 = block * kBlockN + copy_row;
      VCopy::issue(v_tile(stage), v_staging(stage), values.from(key0), p.v.stride_dim,
                   p.seq_kv - key0, C::kDimV - dv0, copier);
    };
    // The warp's first key row of stage `stage` as the e4m3 fragments read
    // it: in its share of the staging, or the block's staging.
    const auto key_bytes = [&](int stage) {
      return reinterpret_cast<const u8*>(k_staging(stage)) +
             (kWarpCopies ? 0 : warp_key) * kKeyRowBytes;
    };
    const auto value_bytes = [&](int stage) {
      return reinterpret_cast<const u8*>(v_staging(stage)) +
             (kWarpCopies ? 0 : warp_key) * kValueRowBytes;
    };
    // Until the copies are seen: by the warp where it copies its own keys.
    const auto copies_sync = [] {
      if constexpr (kWarpCopies)
        __syncwarp();
      else
        __syncthreads();
    };
    // S = Q·K[j]ᵀ ([row tile][key n-tile][C fragment]) over the warp's keys
    // of K's tile (or staging) `stage`, made probabilities by the online
    // softmax, O rescaled to its new maxima.
    const auto probabilities = [&](float (&s)[kRowTiles][kScoreTiles][4], int stage,
                                   int n_block) {
      const int key0 = n_block * kBlockN + warp_key;
      const u16* k = smem.k[kStaged ? 0 : stage] + warp_key * kQKStride;
      if (C::kCacheQ && n_block == first_block) {
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          if constexpr (kE4m3Fragments)
            load_a_rows_e4m3_order(q_frag[C::kCacheQ ? ks : 0], q_warp, kQKStride, ks * 16, lane);
          else
            load_a_rows(q_frag[C::kCacheQ ? ks : 0], q_warp, kQKStride, ks * 16, lane);
        }
      }
      zero(s);
      if constexpr (kE4m3Fragments) {
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          if (C::kCacheQ) {
            mma_k_step_e4m3_nk(s, q_frag[C::kCacheQ ? ks : 0], key_bytes(stage), kKeyRowBytes,
                               ks * 16, lane);
          } else {
            u32 a[kRowTiles][4];
            load_a_rows_e4m3_order(a, q_warp, kQKStride, ks * 16, lane);
            mma_k_step_e4m3_nk(s, a, key_bytes(stage), kKeyRowBytes, ks * 16, lane);
          }
        }
      } else if (C::kCacheQ) {
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks)
          mma_k_step<kMmaE, false>(s, q_frag[C::kCacheQ ? ks : 0], k, kQKStride, ks * 16, lane);
      } else {
        gemm_smem_nk<kMmaE, kRowTiles, kScoreTiles, kKSteps>(s, q_warp, kQKStride, k, kQKStride,
                                                         lane);
      }
      if constexpr (C::kFp8Cache) scale_scores(s, score_factor);
      logits<C>(s, p, warp_row0, key0, lane, site);
      float correction[kRowTiles][2];
      softmax.update(s, correction);
      scale_rows(o, correction);
    };

    if constexpr (kRing) {
      // Blocks first_block .. first_block + kStages - 2 ahead (a commit
      // group each, empty past the share: the waits count groups).
#pragma unroll
      for (int i = 0; i < kStages - 1; ++i) {
        if (first_block + i < n_blocks) {
          issue_keys(first_block + i, i);
          issue_values(first_block + i, i);
        }
        cp_async_commit();
      }
      for (int n_block = first_block; n_block < n_blocks; ++n_block) {
        const int i = n_block - first_block, stage = i % kStages;
        // The stage block n_block - 1 was read from: free since the
        // copies_sync that ended its iteration.
        const int ahead = n_block + kStages - 1;
        if (ahead < n_blocks) {
          issue_keys(ahead, (i + kStages - 1) % kStages);
          issue_values(ahead, (i + kStages - 1) % kStages);
        }
        cp_async_commit();
        cp_async_wait<kStages - 1>();
        copies_sync();
        if constexpr (kStaged && !kE4m3Fragments) {
          const int key0 = n_block * kBlockN + copy_row;
          KCopy::finish(k_tile(0), k_staging(stage), keys.from(key0), p.seq_kv - key0,
                        C::kDimQK, copier);
          VCopy::finish(v_tile(0), v_staging(stage), values.from(key0), p.seq_kv - key0,
                        C::kDimV - dv0, copier);
          copies_sync();
        }
        float s[kRowTiles][kScoreTiles][4];
        probabilities(s, stage, n_block);
        if constexpr (kE4m3Fragments)
          attend_e4m3_values(o, s, value_bytes(stage), lane);
        else
          attend_values(o, s, smem.v[kStaged ? 0 : stage], warp_key, lane);
        copies_sync();  // the stage is read before it is refilled
      }
    } else {  // the CTA copies together (copy_row 0, copier = thread)
      if (n_blocks > first_block) issue_keys(first_block, 0);
      cp_async_commit();
      for (int n_block = first_block; n_block < n_blocks; ++n_block) {
        const int key0 = n_block * kBlockN;
        // V[j] streams in while S = Q·K[j]ᵀ is computed.
        issue_values(n_block, 0);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if constexpr (kStaged && !kE4m3Fragments) {
          KCopy::finish(k_tile(0), k_staging(0), keys.from(key0), p.seq_kv - key0, C::kDimQK,
                        copier);
          __syncthreads();
        }
        float s[kRowTiles][kScoreTiles][4];
        probabilities(s, 0, n_block);

        cp_async_wait<0>();
        __syncthreads();  // V[j] is in, and every warp is done reading K[j]
        if constexpr (kStaged && !kE4m3Fragments) {
          VCopy::finish(v_tile(0), v_staging(0), values.from(key0), p.seq_kv - key0,
                        C::kDimV - dv0, copier);
          __syncthreads();
        }
        if (n_block + 1 < n_blocks) issue_keys(n_block + 1, 0);
        cp_async_commit();

        if constexpr (kE4m3Fragments)
          attend_e4m3_values(o, s, value_bytes(0), lane);
        else
          attend_values(o, s, smem.v[0], warp_key, lane);
        __syncthreads();  // every warp is done reading V[j] before it is overwritten
      }
    }
    cp_async_wait<0>();
    if constexpr (kKeySplit) {
      float* scratch = reinterpret_cast<float*>(kE4m3Fragments ? smem.first_staging(0) : smem.k[0]);
      Merge::merge(scratch, softmax, o, warp, lane);
      if (warp != 0) return;  // warp 0 stores the tile
    }
    if constexpr (kE4m3Fragments) o_to_column_order(o, lane);

    float inverse_sum[kRowTiles][2], lse[kRowTiles][2];
    static_assert(!(C::kSplitKeys && C::kSinks), "a share's partial results hold no sink");
    softmax.template finish<C::kSinks>(inverse_sum, lse, sink_log2<C>(p, head));
    if constexpr (C::kFp8Cache)  // the values' scale, out of the tiles
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
        for (int h = 0; h < 2; ++h) inverse_sum[rt][h] *= values.scale;
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

  // O += P·V over the warp's keys of the e4m3 rows from `values` (its
  // staging): O's n-tiles in mma_k_step_e4m3_kn's column order.
  static __device__ __forceinline__ void attend_e4m3_values(
      float (&o)[kRowTiles][kOutTiles][4], const float (&s)[kRowTiles][kScoreTiles][4],
      const u8* values, int lane) {
    gemm_acc_kn_e4m3<kRowTiles, kOutTiles, kWarpKeys / 16>(o, s, values, kValueRowBytes, lane);
  }

  // O += P·V over the warp's keys of tile v: P goes from the S accumulator
  // layout straight into A fragments.
  static __device__ __forceinline__ void attend_values(float (&o)[kRowTiles][kOutTiles][4],
                                                       const float (&s)[kRowTiles][kScoreTiles][4],
                                                       const u16* v, int warp_key, int lane) {
    gemm_acc_kn<kMmaE, kRowTiles, kOutTiles, kWarpKeys / 16>(o, s, v + warp_key * kVStride, kVStride,
                                                          lane);
  }
};

}  // namespace flashgen_device
