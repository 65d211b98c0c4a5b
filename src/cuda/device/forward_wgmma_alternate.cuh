// The wgmma forward for wide value heads without recomputing S (tuning
// split=values): a CTA of two computing warpgroups owns 64 query rows; each
// accumulates O over its half of the value columns, and they take turns
// computing S, warpgroup g the key blocks j with j % 2 == g:
//
//   S(j) = Q·K[j]ᵀ                  wgmma, by the block's owner, all of Dqk
//   P(j) = exp2(S·scale·log2e − m)  the owner's softmax, continuing the
//                                   running max and sum the other warpgroup
//                                   handed over with P(j-1)
//   O_g += P(j)·V[j][:, half g]     wgmma, both warpgroups, P from registers
//
// The owner hands P(j) (as A fragments) and the softmax state after block j
// to the other warpgroup through shared memory: thread t of both warpgroups
// holds the same rows and the same fragment positions, so each thread writes
// and reads its own slot. The softmaxes run one after the other (block j's
// needs block j-1's max), each while the other warpgroup's GEMMs run.
//
// The alternative for Dv past 256, CTAs that each own a 256-column chunk of
// Dv, computes S once per chunk (1.5x the tensor work at D = 384 and 512);
// split=dims (forward_wgmma_split.cuh) sums partial S every block instead.
//
// A producer warpgroup copies K and V by TMA (16-byte aligned rows) into
// separate pipelines: K[j] is released by its owner once S(j) is done, V[j]
// by both once their P(j)·V[j] is, so two stages of each fit 512-wide heads
// in shared memory. With 64-row CTAs every K/V tile serves few rows: in a
// cluster of two (cluster=2, adjacent row blocks of one head) each CTA's
// producer copies half of every tile's slices to both CTAs at once (TMA
// multicast), halving the traffic from L2; a stage is then refilled once
// the warps of both CTAs have released it, and both CTAs traverse the key
// blocks the later one needs (the causal mask hides the rest).
//
// Correct, but measured slower on the H200 than the 256-column chunks at
// every D from 256 to 512 (bench/NOTES.md): only a forced tuning runs it. Softmax, masking, fragment packing, the GEMMs and the
// stores are ForwardWgmma's, over one warpgroup's half of the value columns.
#pragma once

#include "forward_wgmma.cuh"
#include "producer_pipeline.cuh"
#include "tma.cuh"

namespace flashgen_device {

// C (generated): as for ForwardWgmma, with kWarps = 8, kHeadChunks = 1,
// kTma (copy=tma) and kCluster (CTAs sharing each K/V tile: 1 or 2).
template <class C>
struct ForwardWgmmaAlternate {
  static constexpr int E = C::kElement;
  static constexpr int kConsumerWarps = 8;  // two warpgroups over the same 64 rows
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = C::kBlockN;
  static constexpr int kStages = C::kStages;
  static constexpr int kDimQK = round_up(C::kDimQK, 16);  // zero-filled
  static constexpr int kDimV = round_up(C::kDimV, 32);    // zero-filled: two halves of 16n
  static constexpr int kHalfV = kDimV / 2;
  static constexpr int kKeySteps = kBlockN / 16;  // A fragments of P per thread
  static constexpr int kCluster = C::kCluster;
  static_assert(kCluster == 1 || kCluster == 2, "one CTA, or a pair sharing K and V");
  static_assert(C::kWarps == kConsumerWarps && C::kHeadChunks == 1,
                "two warpgroups over all of Dv");
  static_assert(C::kTma, "K and V come by TMA");
  typedef RegisterSplit<kConsumerWarps> Registers;

  // ForwardWgmma over one warpgroup's half of the value columns, with K and
  // V tiles in the TMA layout.
  struct HalfConfig : C {
    static constexpr int kWarps = 4;
    static constexpr int kDimV = ForwardWgmmaAlternate::kHalfV;
    static constexpr int kHeadChunks = 1;
  };
  typedef ForwardWgmma<HalfConfig> Half;
  static constexpr int kScoreTiles = Half::kScoreTiles, kOutTiles = Half::kOutTiles;

  // What a warpgroup hands the other after its block: P as A fragments and
  // the running max and sum of its two rows, [slot][thread] so a warp's
  // accesses are contiguous.
  struct Handoff {
    uint4 p[kKeySteps][128];
    float4 state[128];  // row_max[0], row_max[1], row_sum[0], row_sum[1]
  };

  struct SharedStorage {
    u16 q[kBlockM * kDimQK];           // core-matrix layout (wgmma.cuh)
    u16 k[kStages][kBlockN * kDimQK];  // TMA layout: [kDimQK / 8][kBlockN][8]
    u16 v[kStages][kBlockN * kDimV];   // TMA layout: [kDimV / 8][kBlockN][8]
    Handoff handoff[2];                // by the warpgroup that computed P
    StagePipeline<kStages> keys;       // released by the block's owner
    StagePipeline<kStages> values;     // released by both warpgroups
  };

  // Named barriers (0 is __syncthreads()'s): warpgroup g's handoff is ready
  // (g arrives, the other waits) and free again (the other arrives, g waits).
  static constexpr int kHandoffThreads = 256;
  static __device__ __forceinline__ int ready_barrier(int group) { return 1 + group; }
  static __device__ __forceinline__ int free_barrier(int group) { return 3 + group; }

  struct Work {
    int batch, head, kv_head, row0, n_blocks;
  };

  static __device__ void run(const AttentionParams& p, const TraversedTensorMaps& maps,
                             unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    Work w;
    w.head = blockIdx.y;
    w.batch = blockIdx.z;
    w.kv_head = w.head / p.group_size;
    w.row0 = blockIdx.x * kBlockM;
    // The cluster's rows (blockIdx.x runs along the cluster's CTAs).
    const int cluster_row0 = (blockIdx.x / kCluster) * kCluster * kBlockM;
    w.n_blocks =
        key_blocks_for_rows<C::kCausal, kBlockN>(p, cluster_row0, kCluster * kBlockM);

    if (thread == 0) {
      smem.keys.init(kCluster * kConsumerWarps / 2);
      smem.values.init(kCluster * kConsumerWarps);
      if constexpr (kCluster > 1) fence_barrier_init();
    }
    if (warp < kConsumerWarps)
      copy_core_matrix_tile<kBlockM, kDimQK, C::kVec, kConsumerWarps * 32>(
          smem.q, head_slice<const u16>(p.q, w.batch, w.head) + w.row0 * p.q.stride_seq,
          p.q.stride_seq, p.seq_q - w.row0, C::kDimQK, thread);
    zero_unwritten_columns<kBlockN, kDimQK, kDimV>(smem.k, kKeySlices * 8, smem.v, kValueSlices * 8,
                                                   thread, Registers::kThreads);
    cp_async_commit();
    cp_async_wait<0>();
    fence_async_shared();
    // Q and the barriers are ready (in the whole cluster: the other CTA's
    // producer fills this one's stages); no CTA-wide barrier after this
    // but the cluster's last.
    if constexpr (kCluster > 1)
      cluster_sync();
    else
      __syncthreads();

    if (Registers::is_producer(warp)) {
      if (warp == kConsumerWarps && lane == 0) produce(smem, maps, w);
    } else {
      // The warpgroup, broadcast so that the compiler sees a warp-uniform
      // value: the branches on it (and on the blocks it owns) hold wgmma
      // instructions, which it would otherwise serialize.
      const int group = __shfl_sync(0xffffffffu, warp / 4, 0);
      attend(smem, p, w, group, warp, lane);
    }
    // No CTA leaves while the other may still arrive on its barriers.
    if constexpr (kCluster > 1) cluster_sync();
  }

  // Slices of 8 columns TMA copies (the columns that exist); those past them
  // up to the tiles' widths are zeroed once in every stage.
  static constexpr int kKeySlices = ceil_div(C::kDimQK, 8);
  static constexpr int kValueSlices = ceil_div(C::kDimV, 8);

  // The producer's first thread: K[j] and V[j] into stage j % kStages of
  // their pipelines, one TMA copy per 8-column slice (rows past the
  // sequence end arrive as zeros). In a cluster, this CTA's share of the
  // slices goes to every CTA of it, and the stage's barrier expects the
  // bytes of all.
  static __device__ __forceinline__ void produce(SharedStorage& smem,
                                                 const TraversedTensorMaps& maps, const Work& w) {
    const int rank = kCluster > 1 ? int(cluster_rank()) : 0;
    for (int j = 0; j < w.n_blocks; ++j) {
      const int key0 = j * kBlockN;
      smem.keys.wait_empty(j);
      load_block(smem.k[j % kStages], &maps.first, kKeySlices, key0, w, rank,
                 smem.keys.full_barrier(j));
      smem.values.wait_empty(j);
      load_block(smem.v[j % kStages], &maps.second, kValueSlices, key0, w, rank,
                 smem.values.full_barrier(j));
    }
  }

  // Announces a tile's bytes on this CTA's `full` barrier and issues this
  // CTA's share of its slices (all of them outside a cluster).
  static __device__ __forceinline__ void load_block(u16* tile, const TensorMap* map, int slices,
                                                    int key0, const Work& w, int rank,
                                                    u64* full) {
    mbarrier_arrive_expect_bytes(full, tma_slice_bytes<kBlockN>(slices));
    if constexpr (kCluster == 1) {
      tma_load_slices<kBlockN>(tile, map, slices, 0, key0, w.kv_head, w.batch, full);
    } else {
      const int share = ceil_div(slices, kCluster);
      tma_load_slices_multicast<kBlockN>(tile, map, rank * share,
                                         min_of(slices, (rank + 1) * share), key0, w.kv_head,
                                         w.batch, full, u16((1u << kCluster) - 1));
    }
  }

  // One computing warpgroup: the blocks it owns (j = group, group + 2, ...)
  // and, for every block, its half of O += P·V. Per owned block j:
  //   S(j) issued; P(j-1) received; O rescaled to block j-1's max and
  //   P(j-1)·V[j-1] issued; softmax of S(j) while that runs; P(j) handed
  //   over; O rescaled to block j's max and P(j)·V[j] run. The other
  //   warpgroup's GEMMs fill the tensor cores while this one waits.
  static __device__ __forceinline__ void attend(SharedStorage& smem, const AttentionParams& p,
                                                const Work& w, int group, int warp, int lane) {
    const int group_thread = threadIdx.x & 127;
    const int warp_row0 = w.row0 + (warp & 3) * 16;
    const int n_blocks = w.n_blocks;
    const int half_offset = group * (kHalfV / 8) * kBlockN * 8;  // this half's first slice
    const u64 q_desc = matrix_descriptor(smem.q, 128, kDimQK * 16);
    float o[1][kOutTiles][4];
    float(&o_flat)[kHalfV / 2] = flat(o);
    zero(o);
    OnlineSoftmax<1> softmax;
    softmax.init();
    u32 own_p[kKeySteps][1][4];    // P of this warpgroup's latest block
    u32 other_p[kKeySteps][1][4];  // P of the other's latest block
    float correction[1][2];

    int j = group;
    // Warpgroup 0's first block: nothing accumulated before it.
    if (group == 0 && n_blocks > 0) {
      float s[1][kScoreTiles][4];
      smem.keys.wait_full(0);
      wgmma_fence();
      Half::scores(s, q_desc, smem.k[0]);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(s));
      smem.keys.template release_in_cluster<kCluster>(0, lane);
      Half::block_softmax(s, correction, softmax, p, 0, warp_row0, lane);
      pack_p(own_p, s);
      hand_over(smem, own_p, softmax, group, group_thread, /*first=*/true);
      accumulate_half(o, own_p, smem, 0, half_offset, lane);
      j = 2;
    }
    for (; j < n_blocks; j += 2) {
      float s[1][kScoreTiles][4];
      smem.keys.wait_full(j);
      wgmma_fence();
      Half::scores(s, q_desc, smem.k[j % kStages]);
      wgmma_commit();
      take_over(smem, other_p, softmax, correction, group, group_thread);
      scale_rows(o, correction);
      smem.values.wait_full(j - 1);
      wgmma_fence();
      Half::accumulate_output(o_flat, other_p, smem.v[(j - 1) % kStages] + half_offset);
      wgmma_commit();
      wgmma_wait<1>();  // S(j) is done; P(j-1)·V[j-1] may still run
      fence_registers(flat(s));
      smem.keys.template release_in_cluster<kCluster>(j, lane);
      Half::block_softmax(s, correction, softmax, p, j * kBlockN, warp_row0, lane);
      pack_p(own_p, s);
      hand_over(smem, own_p, softmax, group, group_thread, j < 2);
      wgmma_wait<0>();  // P(j-1)·V[j-1] is done
      fence_registers(o_flat);
      smem.values.template release_in_cluster<kCluster>(j - 1, lane);
      scale_rows(o, correction);
      accumulate_half(o, own_p, smem, j, half_offset, lane);
    }
    if (n_blocks > 0 && j == n_blocks) {  // the last block is the other warpgroup's
      take_over(smem, other_p, softmax, correction, group, group_thread);
      scale_rows(o, correction);
      accumulate_half(o, other_p, smem, j - 1, half_offset, lane);
    }
    // Pairs the other's arrival after reading this warpgroup's last P (each
    // hand-over after the first waited for the one before it).
    if (group < n_blocks) named_barrier_sync(free_barrier(group), kHandoffThreads);

    typename Half::Work out;
    out.batch = w.batch;
    out.head = w.head;
    out.kv_head = w.kv_head;
    out.chunk = group;  // the LSE: warpgroup 0 only
    out.dv0 = group * kHalfV;
    out.row0 = w.row0;
    out.n_blocks = n_blocks;
    out.value_cols = C::kDimV - out.dv0;
    Half::store_outputs(p, out, o, softmax, warp_row0, lane);
  }

  // O += P·V[j] over this warpgroup's half, waited for (a wgmma still running
  // at a loop's back edge would have its accumulators moved while it runs),
  // then V[j] released.
  static __device__ __forceinline__ void accumulate_half(float (&o)[1][kOutTiles][4],
                                                         const u32 (&frag)[kKeySteps][1][4],
                                                         SharedStorage& smem, int j,
                                                         int half_offset, int lane) {
    float(&o_flat)[kHalfV / 2] = flat(o);
    smem.values.wait_full(j);
    fence_registers(o_flat);
    wgmma_fence();
    Half::accumulate_output(o_flat, frag, smem.v[j % kStages] + half_offset);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(o_flat);
    smem.values.template release_in_cluster<kCluster>(j, lane);
  }

  static __device__ __forceinline__ void pack_p(u32 (&frag)[kKeySteps][1][4],
                                                const float (&s)[1][kScoreTiles][4]) {
#pragma unroll
    for (int ks = 0; ks < kKeySteps; ++ks) pack_a_from_acc<E>(frag[ks], s, ks);
  }

  // Writes this warpgroup's P and softmax state into its handoff (once the
  // other warpgroup has read the previous one) and announces it.
  static __device__ __forceinline__ void hand_over(SharedStorage& smem,
                                                   const u32 (&frag)[kKeySteps][1][4],
                                                   const OnlineSoftmax<1>& softmax, int group,
                                                   int group_thread, bool first) {
    Handoff& h = smem.handoff[group];
    if (!first) named_barrier_sync(free_barrier(group), kHandoffThreads);
#pragma unroll
    for (int ks = 0; ks < kKeySteps; ++ks)
      h.p[ks][group_thread] = make_uint4(frag[ks][0][0], frag[ks][0][1], frag[ks][0][2],
                                         frag[ks][0][3]);
    h.state[group_thread] = make_float4(softmax.row_max[0][0], softmax.row_max[0][1],
                                        softmax.row_sum[0][0], softmax.row_sum[0][1]);
    named_barrier_arrive(ready_barrier(group), kHandoffThreads);
  }

  // Reads the other warpgroup's P and softmax state (waiting for them),
  // frees its handoff, adopts the state and returns in `correction` the
  // factor that brings this warpgroup's O to the new running max.
  static __device__ __forceinline__ void take_over(SharedStorage& smem,
                                                   u32 (&frag)[kKeySteps][1][4],
                                                   OnlineSoftmax<1>& softmax,
                                                   float (&correction)[1][2], int group,
                                                   int group_thread) {
    const int other = 1 - group;
    const Handoff& h = smem.handoff[other];
    named_barrier_sync(ready_barrier(other), kHandoffThreads);
#pragma unroll
    for (int ks = 0; ks < kKeySteps; ++ks) {
      const uint4 x = h.p[ks][group_thread];
      frag[ks][0][0] = x.x;
      frag[ks][0][1] = x.y;
      frag[ks][0][2] = x.z;
      frag[ks][0][3] = x.w;
    }
    const float4 state = h.state[group_thread];
    named_barrier_arrive(free_barrier(other), kHandoffThreads);
    const float new_max[2] = {state.x, state.y};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      correction[0][r] =
          fast_exp2(softmax_base(softmax.row_max[0][r]) - softmax_base(new_max[r]));
      softmax.row_max[0][r] = new_max[r];
    }
    softmax.row_sum[0][0] = state.z;
    softmax.row_sum[0][1] = state.w;
  }
};

}  // namespace flashgen_device
