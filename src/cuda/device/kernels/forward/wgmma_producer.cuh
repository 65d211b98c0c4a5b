// The wgmma forward with a producer warpgroup: one extra warpgroup, whose
// warps copy K and V into kStages stages (all four with cp.async; with TMA
// one thread issues every copy) while the other warpgroups only compute,
// and which hands most of its registers to them (RegisterSplit). Stage s
// has a "full" barrier (each copying warp arrives once its share of K[j]
// and V[j] has landed; TMA: the copies' bytes complete it) and
// an "empty" one (every consumer warp arrives once it no longer reads
// block j), so warpgroups wait for their data, not for each other: one's
// softmax can run while another's GEMMs do, instead of the lockstep of a
// __syncthreads per key block in kernels/forward/wgmma.cuh.
//
// The stages and their barriers are StagePipelines (pipeline/producer_pipeline.cuh):
// with cp.async copies one for K and V together (three stages or more: the
// producer signals block j-1 after issuing block j); with TMA copies one
// each, so K[j+2] refills K[j]'s stage as soon as S(j) is done, while
// P(j)·V[j] may still run and V[j]'s stage waits for it. Two stages of each
// then hide the copies as three shared ones do, in the shared memory of
// two: room for 64- to 80-key blocks at D = 256.
//
// Rows aligned to 4 bytes or more (the copies go straight into the
// core-matrix tiles); everything else (shapes, masking, softmax, stores) is
// ForwardWgmma's. With C::kTma (copy=tma; 16-byte aligned rows) one thread
// of the producer copies K[j] and V[j] by TMA in slices of 16 columns (into
// swizzled tiles with swizzle=32, else 8), a tensor's whole slices in one
// copy (a value chunk's a copy per slice), which complete on the stage's
// full barrier; the tiles then have the layout TMA writes (TraversedTile).
//
// Rows that are not 16-byte aligned (odd head dims: alignment classes 1, 2,
// 4) go by TMA too where the heads are adjacent in each token's row
// (kTokenRows): the maps are token-row views (tensor_maps.hpp), and head
// h's slices start at the 32-byte boundary at or before column h · D of
// the row, a copy each (TMA starts boxes only at whole 16 bytes). The
// tiles so hold the head's columns shifted by Work::key_shift and
// value_shift, as do Q's tile and O's accumulators (ForwardWgmma), and the
// first and last slices carry the neighbouring heads' columns. In O = P·V
// those only reach columns of O that are never stored; in S = Q·Kᵀ they
// meet Q's zeros, but 0 · Inf is NaN: so the producer warpgroup's second
// warp zeroes them in every K stage once it has landed, and the computing
// warps wait for that (FixedStages) instead of for the copies.
//
// schedule=persistent (C::kPersistent; TMA on 16-byte rows): the host
// launches a CTA per SM, and each walks tiles of the grid a CTA per tile
// would have had (walked_query_tile), in that grid's order. The stage
// pipelines count key blocks across the walk, so the producer copies the
// next tile's K and V as soon as stages free up, while the warpgroups still
// compute the last blocks of this one; each warpgroup copies its 64 rows of
// the next tile's Q into the other Q tile while it computes (only its own
// warps read them: a named barrier per warpgroup, not the CTA's). A tile's
// prologue and epilogue so overlap another's copies and GEMMs.
#pragma once

#include "kernels/forward/wgmma.cuh"
#include "pipeline/warp_specialized.cuh"
#include "arch/tma.cuh"

namespace flashgen_device {

template <class C>
struct ForwardWgmmaProducer {
  typedef ForwardWgmma<C> Base;
  static constexpr int kStages = Base::kStages;
  static constexpr int kBlockM = Base::kBlockM, kBlockN = Base::kBlockN;
  static constexpr int kDimQK = Base::kDimQK, kDimV = Base::kDimV;
  static constexpr int kConsumerWarps = C::kWarps;
  static constexpr int kConsumerThreads = C::kWarps * 32;
  // TMA on rows not 16-byte aligned: token-row views, K stages fixed.
  static constexpr bool kTokenRows = Base::kTokenRows;
  // The producer's floor: its copies' address arithmetic spills below 32
  // registers on token rows, and the walk's tile arithmetic does too.
  typedef WarpSpecialized<C::kWarps, C::kTma, kTokenRows || C::kPersistent ? 32 : 24> Roles;
  typedef typename Roles::Registers Registers;
  typedef typename Roles::Copies Copies;
  // pingpong=1: the warpgroups issue their GEMMs in turns.
  typedef GemmTurns<C::kWarps / 4, C::kPingPong> Turns;

  // Base's tiles, then (token rows) the fixed K stages' barriers, then a
  // full and an empty barrier per stage of each pipeline (`values` unused
  // with cp.async copies).
  struct SharedStorage : Base::Tiles, FixedStages<kTokenRows, kStages> {
    StagePipeline<kStages> keys;    // K[j], and V[j] with cp.async copies
    StagePipeline<kStages> values;  // V[j] with TMA copies
  };
  static_assert(C::kTma || kStages >= 3, "cp.async copies signal block j-1 after issuing j");
  static_assert(!C::kPersistent || (C::kTma && !kTokenRows && C::kHeadChunks == 1),
                "the walk: TMA on 16-byte rows, all value columns in one CTA");

  // cp.async copies by the producer warpgroup's four warps.
  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    static_assert(!C::kTma, "copy=tma kernels take the tensor maps");
    run_with(p, shared_bytes,
             [&](SharedStorage& smem, const typename Base::Work& w, int producer_thread) {
               produce(smem, p, w, producer_thread);
             });
  }

  // TMA copies issued by the producer's first thread.
  static __device__ void run(const AttentionParams& p, const TraversedTensorMaps& maps,
                             unsigned char* shared_bytes) {
    static_assert(C::kTma, "only copy=tma kernels take the tensor maps");
    if constexpr (C::kPersistent) return walk(p, maps, shared_bytes);
    run_with(p, shared_bytes,
             [&](SharedStorage& smem, const typename Base::Work& w, int producer_thread) {
               produce_with_tma(smem, maps, w, 0, producer_thread);  // the first warp: its lane
             });
  }

  template <class Produce>
  static __device__ __forceinline__ void run_with(const AttentionParams& p,
                                                  unsigned char* shared_bytes, Produce produce) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const typename Base::Work w = Base::work_of(p);
    set_up(smem, p, w, thread, warp);
    if (Roles::split_roles(warp)) {
      if (Roles::copies(warp)) produce(smem, w, Roles::producer_thread(thread));
      if constexpr (kTokenRows)
        if (Roles::fixes(warp)) fix_key_stages(smem, w, lane);
      return;
    }
    Turns::open();
    attend_tile(smem, p, w, smem.q[0], 0, warp, lane);
  }

  // Before the roles split: thread 0 initialises the barriers, the
  // computing warps copy the (first) tile's Q, and every thread zeroes the
  // tiles' columns TMA never writes.
  static __device__ __forceinline__ void set_up(SharedStorage& smem, const AttentionParams& p,
                                                const typename Base::Work& w, int thread,
                                                int warp) {
    if (thread == 0) {
      smem.keys.init(kConsumerWarps, Copies::kFullArrivals);
      smem.values.init(kConsumerWarps);
      if constexpr (kTokenRows) smem.fixed.init(1, 32);  // each lane of the fixing warp
    }
    if (warp < kConsumerWarps)
      Base::template copy_queries<kConsumerThreads>(smem.q[0], p, w, thread);
    if constexpr (C::kTma)
      zero_unwritten_columns<kBlockN, kDimQK, kDimV>(smem.k, key_slices(w) * kSliceCols, smem.v,
                                                     value_slices(w) * kSliceCols, thread,
                                                     Registers::kThreads);
  }

  // A computing warp's share of one tile: its warpgroup's rows of `queries`
  // (Q's tile) against the key blocks the stages hold from block0 on, then
  // its rows of O and LSE.
  static __device__ __forceinline__ void attend_tile(SharedStorage& smem, const AttentionParams& p,
                                                     const typename Base::Work& w,
                                                     const u16* queries, int block0, int warp,
                                                     int lane) {
    const int group = warp / 4;
    const int warp_row0 = w.row0 + warp * 16;
    const u64 q_desc = matrix_descriptor(queries + group * 64 * kDimQK, 128, kDimQK * 16);
    const ScoreSite site = score_site<C>(p, w.batch, w.head);
    float o[1][Base::kOutTiles][4];
    OnlineSoftmax<1> softmax;
    if constexpr (C::kTma)
      Base::template attend<Turns>(
          p, w.n_blocks, w.first_key, block0, site, q_desc, smem.k, smem.v, o, softmax, warp_row0,
          lane,
          [&](int block) {
            if constexpr (kTokenRows)
              smem.fixed.wait_full(block);
            else
              smem.keys.wait_full(block);
            if (block > block0) smem.values.wait_full(block - 1);
          },
          [&](int block) { smem.keys.release(block, lane); },
          [&](int block) { smem.values.release(block, lane); },
          [&] {
            smem.values.wait_full(block0 + w.n_blocks - 1);
            if constexpr (C::kVarlen) zero_values_past_keys(smem, p, w, block0, warp);
          });
    else
      Base::template attend<Turns>(
          p, w.n_blocks, w.first_key, block0, site, q_desc, smem.k, smem.v, o, softmax, warp_row0,
          lane, [&](int block) { smem.keys.wait_full(block); }, [](int) {},
          [&](int block) { smem.keys.release(block, lane); },
          [] {});  // V[n-1] arrived with K[n-1]
    Base::store_outputs(p, w, o, softmax, warp_row0, lane);
  }

  // Packed sequences: TMA copies the last key block's rows past the
  // sequence's keys from the next sequence's. P is 0 there, but 0 · Inf is
  // NaN, so each computing warpgroup zeroes those rows of V's stage before
  // its last P·V (the same zeros whichever warpgroup writes them, and the
  // stage is not refilled within the tile), then makes its stores visible
  // to its wgmma (the async proxy) and waits for its four warps.
  static __device__ __forceinline__ void zero_values_past_keys(SharedStorage& smem,
                                                               const AttentionParams& p,
                                                               const typename Base::Work& w,
                                                               int block0, int warp) {
    const int last_key0 = w.first_key + (w.n_blocks - 1) * kBlockN;
    const int keys = p.seq_kv - last_key0;
    if (keys >= kBlockN) return;
    zero_rows_from<kBlockN, kDimV, kSliceCols>(
        smem.v[(block0 + w.n_blocks - 1) % kStages], max_of(keys, 0), threadIdx.x & 127, 128);
    fence_async_shared();
    named_barrier_sync(1 + warp / 4, 128);
  }

  // schedule=persistent: the CTA's tiles of the walk (walk_step_tile; the
  // host launches no more CTAs than tiles). Q's tiles alternate: step i's
  // in q[i % 2]. The computing warps' loop is written
  // out beside the producer's (walk_producer), not shared through a
  // callback (an earlier form that shared one spilled 144-336 bytes). Each
  // tile's Work is found twice, once to copy its Q and once to attend it,
  // rather than kept in registers across a tile.
  static __device__ void walk(const AttentionParams& p, const TraversedTensorMaps& maps,
                              unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    if (blockIdx.x >= p.tile_count) return;  // (the host launches no such CTA)
    // 16-byte rows: the columns the copies never write are the same in every tile.
    set_up(smem, p, Base::walked_work(p, blockIdx.x), thread, warp);
    if (Roles::split_roles(warp)) {
      if (Roles::copies(warp)) walk_producer(smem, maps, p, Roles::producer_thread(thread));
      return;
    }
    const int group = warp / 4, group_thread = thread & 127;
    Turns::open();
    int block0 = 0;
    for (unsigned step = 0, tile = blockIdx.x; tile < p.tile_count; ++step) {
      const unsigned next = walk_step_tile(step + 1);
      if (step != 0) {
        // This warpgroup's rows of Q, copied by its own threads during the
        // last tile, have landed; its four warps are past that tile, so the
        // other Q tile is free for the next one.
        cp_async_wait<0>();
        fence_async_shared();
        named_barrier_sync(1 + group, 128);
      }
      if (next < p.tile_count)
        copy_warpgroup_queries(smem.q[(step + 1) & 1], p, Base::walked_work(p, next), group,
                               group_thread);
      const typename Base::Work w = Base::walked_work(p, tile);
      attend_tile(smem, p, w, smem.q[step & 1], block0, warp, lane);
      block0 += w.n_blocks;
      tile = next;
    }
  }

  // Warpgroup `group`'s 64 rows of a tile's Q into its rows of `tile`, by
  // its 128 threads (cp.async, committed; zeros past the last query). A
  // warpgroup with no rows left copies zeros from the block's first row, as
  // the CTA's own copy would (no address past the tensor, read or not).
  static __device__ __forceinline__ void copy_warpgroup_queries(u16* tile,
                                                                const AttentionParams& p,
                                                                const typename Base::Work& w,
                                                                int group, int group_thread) {
    const int rows_left = p.seq_q - (w.row0 + group * 64);
    const u16* rows = rows_left > 0 ? w.q + group * 64 * p.q.stride_seq : w.q;
    copy_core_matrix_tile<64, kDimQK, C::kVec, 128>(tile + group * 64 * kDimQK, rows,
                                                     p.q.stride_seq, rows_left, C::kDimQK,
                                                     group_thread);
    cp_async_commit();
  }

  // The producer warp's first lane in a walk: every tile's K and V blocks,
  // numbered on across tiles.
  static __device__ __forceinline__ void walk_producer(SharedStorage& smem,
                                                       const TraversedTensorMaps& maps,
                                                       const AttentionParams& p, int lane) {
    if (lane != 0) return;
    int block0 = 0;
    for (unsigned step = 0, tile = blockIdx.x; tile < p.tile_count;
         tile = walk_step_tile(++step)) {
      const typename Base::Work w = Base::walked_work(p, tile);
      produce_with_tma(smem, maps, w, block0, lane);
      block0 += w.n_blocks;
    }
  }

  // TMA copies slices of kSliceCols columns (8; 16 into swizzled tiles) of
  // the columns that exist (K: Dqk; V: the chunk's; token rows: from the
  // 32-byte boundary before them); the slices past them, up to the tiles'
  // widths (multiples of 16), are zeroed once in every stage and never
  // written again.
  static constexpr int kSliceCols = tma_slice_columns(C::kSwizzle);
  static __device__ __forceinline__ int key_slices(const typename Base::Work& w) {
    return slices_holding<kSliceCols>(w.key_shift, C::kDimQK);
  }
  static __device__ __forceinline__ int value_slices(const typename Base::Work& w) {
    return slices_holding<kSliceCols>(w.value_shift, min_of(w.value_cols, kDimV));
  }

  // The fixing warp (token rows): once K[j] has landed, the columns of the
  // heads before and after this one (before the key shift, past Dqk after
  // it) become zero, and its lanes tell the computing warps (each arrives
  // after its own stores).
  static __device__ __forceinline__ void fix_key_stages(SharedStorage& smem,
                                                        const typename Base::Work& w, int lane) {
    smem.fix_each(smem.keys, w.n_blocks, [&](int stage) {
      zero_neighbour_columns<kBlockN, kSliceCols>(smem.k[stage], w.key_shift, C::kDimQK, lane, 32);
    });
  }

  // The producer warp's first lane: the tile's K[j] and V[j] into stage
  // (block0 + j) % kStages of their pipelines (block0: as in Base::attend;
  // tma_load_announced_tile; a value chunk a copy per slice), completing on
  // the stage's full barrier. Rows (and a last slice's columns) past the
  // ends arrive as zeros.
  static __device__ __forceinline__ void produce_with_tma(SharedStorage& smem,
                                                          const TraversedTensorMaps& maps,
                                                          const typename Base::Work& w, int block0,
                                                          int lane) {
    if (lane != 0) return;
    const int value_slice_count = value_slices(w);
    for (int n_block = 0; n_block < w.n_blocks; ++n_block) {
      const int j = block0 + n_block;
      const int stage = j % kStages;
      const int key0 = w.tma_key_row0 + w.first_key + n_block * kBlockN;  // TMA's row
      smem.keys.wait_empty(j);
      if constexpr (kTokenRows) {  // head kv_head's columns of the token rows
        tma_load_announced_token_row_tile<kBlockN, kSliceCols, false>(
            smem.k[stage], maps, key_slices(w), w.kv_head * C::kDimQK - w.key_shift, key0,
            w.tma_batch, smem.keys.full_barrier(j));
        smem.values.wait_empty(j);
        tma_load_announced_token_row_tile<kBlockN, kSliceCols, true>(
            smem.v[stage], maps, value_slice_count, w.kv_head * C::kDimV + w.dv0 - w.value_shift,
            key0, w.tma_batch, smem.values.full_barrier(j));
        continue;
      }
      tma_load_announced_tile<kBlockN, kSliceCols, C::kDimQK>(
          smem.k[stage], &maps.sliced[0], &maps.view[0], key0, w.kv_head, w.tma_batch,
          smem.keys.full_barrier(j));
      smem.values.wait_empty(j);
      if constexpr (C::kHeadChunks == 1)  // all of V: its whole slices in one copy
        tma_load_announced_tile<kBlockN, kSliceCols, C::kDimV>(
            smem.v[stage], &maps.sliced[1], &maps.view[1], key0, w.kv_head, w.tma_batch,
            smem.values.full_barrier(j));
      else  // this CTA's chunk of V's columns, a copy per slice
        tma_load_announced_slices<kBlockN, kSliceCols>(smem.v[stage], &maps.view[1],
                                                       value_slice_count, w.dv0, key0, w.kv_head,
                                                       w.tma_batch, smem.values.full_barrier(j));
    }
  }

  // The producer warps: K[j] and V[j] into stage j % kStages, each warp
  // copying its share and signalling the stage once its copies have landed.
  static __device__ __forceinline__ void produce(SharedStorage& smem, const AttentionParams& p,
                                                 const typename Base::Work& w,
                                                 int producer_thread) {
    smem.keys.produce(w.n_blocks, [&](int n_block, int stage) {
      const int key0 = w.first_key + n_block * kBlockN;
      copy_core_matrix_tile<kBlockN, kDimQK, C::kVec, Copies::kThreads>(
          smem.k[stage], w.k + key0 * p.k.stride_seq, p.k.stride_seq, p.seq_kv - key0, C::kDimQK,
          producer_thread);
      copy_core_matrix_tile<kBlockN, kDimV, C::kVec, Copies::kThreads>(
          smem.v[stage], w.v + key0 * p.v.stride_seq, p.v.stride_seq, p.seq_kv - key0, w.value_cols,
          producer_thread);
    });
  }
};

}  // namespace flashgen_device
