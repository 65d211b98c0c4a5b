// The wgmma key/value backward for heads too wide for one warpgroup to hold
// both dK and dV (Dqk + Dv > 256; each of them up to 256 columns), which
// the kernel with one warpgroup per 64 keys splits into column chunks that
// each recompute Sᵀ and dPᵀ. Here two computing warpgroups share the CTA's
// 64 keys and split the outputs instead (split=outputs), each computing two
// of the four GEMMs:
//
//   warpgroup 0:  Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ·scale·log2e − L2) (masked),
//                 handed to warpgroup 1 through shared memory; dV += Pᵀ·dO
//   warpgroup 1:  dPᵀ = V·dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − Dterm); dK += dSᵀ·Q
//
// A producer warpgroup copies the traversed Q and dO by TMA (16-byte
// aligned rows, or token rows as kernels/backward_key_value/wgmma_producer.cuh
// reads them) into two stages, with their rows' L2 and Dterm. Each
// warpgroup runs its GEMMs of block j beside its product of block j−1, as
// kernels/backward_key_value/wgmma.cuh does; the hand-over of Pᵀ is double-buffered
// (two named barriers per buffer: ready, and free again), so warpgroup 0
// can run up to two blocks ahead. Deterministic: no atomics, a fixed order.
#pragma once

#include "kernels/backward_key_value/wgmma_producer.cuh"
#include "arch/wgmma_gemm.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated): kElement, kDimQK, kDimV, kWarps (8: two computing
// warpgroups), kBlockN, kVec, kCausal, kTma (true), kSwizzle.
template <class C>
struct BackwardKeyValueWgmmaSplit {
  static constexpr int E = C::kElement;
  static constexpr int kBlockM = 64;  // key rows per CTA, shared by both warpgroups
  static constexpr int kBlockN = C::kBlockN;
  static constexpr bool kTokenRows = C::kVec < 8;  // wider tiles, the stages fixed
  static constexpr int kDimQK = head_tile_width(C::kDimQK, C::kVec, kTokenRows);
  static constexpr int kDimV = head_tile_width(C::kDimV, C::kVec, kTokenRows);
  static constexpr int kStages = 2;
  static constexpr int kQueryTiles = kBlockN / 8;
  static constexpr int kConsumerWarps = C::kWarps;
  static_assert(C::kWarps == 8, "two computing warpgroups over the same 64 keys");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256 && kDimQK <= 256 && kDimV <= 256,
                "wgmma n is 16..256; dK (or dV) lives in one warpgroup's registers");
  static_assert(C::kTma && C::kVec >= 1, "Q and dO are copied by TMA");
  typedef WarpSpecialized<C::kWarps, true, kTokenRows ? 32 : 24> Roles;
  typedef typename Roles::Registers Registers;
  typedef QueryTraversal<kBlockN> Traversal;
  typedef TraversedTile<kBlockN, kDimQK, true, C::kSwizzle> Queries;
  typedef TraversedTile<kBlockN, kDimV, true, C::kSwizzle> GradOs;

  // Pᵀ of one block as warpgroup 0's threads hold it: element i of thread
  // t at [i][t], which warpgroup 1's thread t reads back (same fragment
  // layout), without bank conflicts.
  static constexpr int kHandoverFloats = kBlockN / 2;
  static constexpr int kGroupThreads = 128;
  static constexpr int kHandoffThreads = 2 * kGroupThreads;

  struct Tiles
      : KeyValueWgmmaTiles<kBlockM * kDimQK, kBlockM * kDimV, kBlockN, kDimQK, kDimV, kStages> {
    float handover[2][kHandoverFloats * kGroupThreads];
  };
  // The tiles, (token rows) the fixed stages' barriers, then a full and an
  // empty barrier per stage.
  struct SharedStorage : Tiles, FixedStages<kTokenRows, kStages> {
    StagePipeline<kStages> pipeline;
  };

  // Named barriers of the hand-over buffers (0 is __syncthreads').
  static __device__ __forceinline__ int ready_barrier(int buffer) { return 1 + buffer; }
  static __device__ __forceinline__ int free_barrier(int buffer) { return 3 + buffer; }

  static __device__ void run(const AttentionParams& p, const TraversedTensorMaps& maps,
                             unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const CtaTile tile = key_tile<kBlockM, 1, C::kCausal>();
    const int kv_head = tile.head, batch = tile.batch, key0 = tile.row0;
    const Traversal walk = Traversal::template of<C>(p, tile, kBlockM);
    // Token rows: one query head, the kv head's (the host's rule).
    const HeadShifts shifts = head_shifts<C, kTokenRows>(walk.first_head);  // Q's and dO's

    if (thread == 0) {
      smem.pipeline.init(kConsumerWarps * 32, kQueryBlockArrivals);
      if constexpr (kTokenRows) smem.fixed.init(1, 32);  // each lane of the fixing warp
    }
    if (warp < kConsumerWarps)
      copy_key_value_rows<C, kBlockM, kConsumerWarps * 32, kDimQK, kDimV, kTokenRows>(
          smem.k, smem.v, p, batch, kv_head, key0, thread, shifts);
    if (!start_query_block_producer<kDimQK, kDimV, C::kDimQK, C::kDimV, C::kSwizzle, Roles,
                                    kTokenRows>(smem, maps, p, walk, batch, shifts, thread))
      return;
    // The warpgroup, broadcast so that the compiler sees a warp-uniform
    // value: the branches on it hold wgmma instructions, which it would
    // otherwise serialize.
    const int group = __shfl_sync(0xffffffffu, warp / 4, 0);
    const int warp_key0 = key0 + (warp & 3) * 16;
    const int group_thread = thread & (kGroupThreads - 1);
    if (group == 0) {
      float dv[1][kDimV / 8][4];
      accumulate_values(smem, p, walk, dv, warp_key0, group_thread, lane);
      store_rows_times<E, C::kVec>(p.grad_v, batch, kv_head, warp_key0, 0, dv, 1.0f,
                                   p.seq_kv - warp_key0, C::kDimV, lane, shifts.v);
    } else {
      float dk[1][kDimQK / 8][4];
      accumulate_keys(smem, p, walk, dk, warp_key0, group_thread, lane);
      store_rows_times<E, C::kVec>(p.grad_k, batch, kv_head, warp_key0, 0, dk, p.scale,
                                   p.seq_kv - warp_key0, C::kDimQK, lane, shifts.qk);
    }
  }

  // Warpgroup 0: Sᵀ(j) beside dV += Pᵀ(j−1)·dO(j−1); Pᵀ(j) handed over.
  static __device__ __forceinline__ void accumulate_values(
      SharedStorage& smem, const AttentionParams& p, const Traversal& walk,
      float (&dv)[1][kDimV / 8][4], int warp_key0, int group_thread, int lane) {
    const u64 k_desc = matrix_descriptor(smem.k, 128, kDimQK * 16);
    traverse(
        smem, walk.total, dv,
        [&](float(&st)[1][kQueryTiles][4], int j) { scores(st, k_desc, smem.q[j % kStages]); },
        [&](const u32(&pt_frag)[kBlockN / 16][1][4], int j) {
          value_product(dv, pt_frag, smem.grad_o[j % kStages]);
        },
        [&](float(&st)[1][kQueryTiles][4], int j) {
          transposed_probabilities<C>(st, smem.lse_log2[j % kStages], p, walk, j, warp_key0, lane);
          hand_over(smem, st, j, group_thread);
        },
        lane);
  }

  // Warpgroup 1: dPᵀ(j) beside dK += dSᵀ(j−1)·Q(j−1); dSᵀ(j) from the
  // Pᵀ(j) handed over.
  static __device__ __forceinline__ void accumulate_keys(SharedStorage& smem,
                                                         const AttentionParams& p,
                                                         const Traversal& walk,
                                                         float (&dk)[1][kDimQK / 8][4],
                                                         int warp_key0, int group_thread,
                                                         int lane) {
    const u64 v_desc = matrix_descriptor(smem.v, 128, kDimV * 16);
    traverse(
        smem, walk.total, dk,
        [&](float(&dpt)[1][kQueryTiles][4], int j) {
          grad_scores(dpt, v_desc, smem.grad_o[j % kStages]);
        },
        [&](const u32(&dst_frag)[kBlockN / 16][1][4], int j) {
          key_product(dk, dst_frag, smem.q[j % kStages]);
        },
        [&](float(&dpt)[1][kQueryTiles][4], int j) {
          take_over(smem, dpt, p, walk, j, warp_key0, group_thread, lane);
        },
        lane);
  }

  // One warpgroup's loop over the traversed blocks, accumulating into acc:
  // gemm(s, j) issues its GEMM of block j (overwriting s) and product(a, j)
  // its product of block j with the A fragments a (into acc); block j's
  // GEMM runs beside block j−1's product, and side(s, j) (the element-wise
  // work and the hand-over) while the product still runs; then s is packed
  // into the next product's A fragments. Block 0 (no product yet) and the
  // last product are peeled off the loop, so no wgmma sits in a branch.
  template <int kAccTiles, class Gemm, class Product, class Side>
  static __device__ __forceinline__ void traverse(SharedStorage& smem, int total,
                                                  float (&acc)[1][kAccTiles][4], Gemm gemm,
                                                  Product product, Side side, int lane) {
    zero(acc);
    u32 frag[kBlockN / 16][1][4];  // block j−1's scores as A fragments
    if (total > 0) {
      query_block_ready<kTokenRows>(smem, 0);
      float s[1][kQueryTiles][4];
      wgmma_fence();
      gemm(s, 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(s));
      side(s, 0);
      pack(frag, s);
    }
    for (int j = 1; j < total; ++j) {
      query_block_ready<kTokenRows>(smem, j);
      float s[1][kQueryTiles][4];
      fence_registers(flat(acc));
      wgmma_fence();
      gemm(s, j);
      wgmma_commit();
      product(frag, j - 1);
      wgmma_commit();
      wgmma_wait<1>();  // block j's GEMM is done; block j−1's product may still run
      fence_registers(flat(s));
      side(s, j);
      wgmma_wait<0>();  // the A fragments of block j−1 are free
      fence_registers(flat(acc));
      smem.pipeline.release_each(j - 1);
      pack(frag, s);
    }
    if (total > 0) {
      fence_registers(flat(acc));
      wgmma_fence();
      product(frag, total - 1);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(acc));
    }
  }

  static __device__ __forceinline__ void pack(u32 (&frag)[kBlockN / 16][1][4],
                                              const float (&s)[1][kQueryTiles][4]) {
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) pack_a_from_acc<E>(frag[ks], s, ks);
  }

  // Issues Sᵀ = K·Qᵀ (overwriting st): K from shared memory, Q read K-major.
  static __device__ __forceinline__ void scores(float (&st)[1][kQueryTiles][4], u64 k_desc,
                                                const u16* q_tile) {
    const u64 q_desc = Queries::k_major(q_tile);
    gemm_shared<E, kDimQK / 16, Queries::kKMajorStep>(flat(st), k_desc, q_desc);  // A (K) steps 256 bytes
  }

  // Issues dPᵀ = V·dOᵀ (overwriting dpt): V from shared memory, dO read K-major.
  static __device__ __forceinline__ void grad_scores(float (&dpt)[1][kQueryTiles][4], u64 v_desc,
                                                     const u16* grad_o_tile) {
    const u64 grad_o_desc = GradOs::k_major(grad_o_tile);
    gemm_shared<E, kDimV / 16, GradOs::kKMajorStep>(flat(dpt), v_desc, grad_o_desc);
  }

  // Issues dV += Pᵀ·dO (dO read MN-major, 16 queries a k step).
  static __device__ __forceinline__ void value_product(float (&dv)[1][kDimV / 8][4],
                                                       const u32 (&pt_frag)[kBlockN / 16][1][4],
                                                       const u16* grad_o_tile) {
    const u64 grad_o_desc = GradOs::mn_major(grad_o_tile);
    gemm_accumulate<E, GradOs::kMnMajorStep>(flat(dv), pt_frag, grad_o_desc);
  }

  // Issues dK += dSᵀ·Q (Q read MN-major).
  static __device__ __forceinline__ void key_product(float (&dk)[1][kDimQK / 8][4],
                                                     const u32 (&dst_frag)[kBlockN / 16][1][4],
                                                     const u16* q_tile) {
    const u64 q_desc = Queries::mn_major(q_tile);
    gemm_accumulate<E, Queries::kMnMajorStep>(flat(dk), dst_frag, q_desc);
  }

  // Warpgroup 0 writes Pᵀ(j) into buffer j % 2, once warpgroup 1 has read
  // block j−2's from it, and marks it ready.
  static __device__ __forceinline__ void hand_over(SharedStorage& smem,
                                                   float (&st)[1][kQueryTiles][4], int j,
                                                   int group_thread) {
    const int buffer = j & 1;
    if (j >= 2) named_barrier_sync(free_barrier(buffer), kHandoffThreads);
    const float(&values)[kHandoverFloats] = flat(st);
    float* out = smem.handover[buffer] + group_thread;
#pragma unroll
    for (int i = 0; i < kHandoverFloats; ++i) out[i * kGroupThreads] = values[i];
    named_barrier_arrive(ready_barrier(buffer), kHandoffThreads);
  }

  // Warpgroup 1 waits for Pᵀ(j), turns dPᵀ(j) into dSᵀ(j) = Pᵀ ∘ (dPᵀ −
  // Dterm[query]) and frees the buffer (when warpgroup 0 will fill it again).
  static __device__ __forceinline__ void take_over(SharedStorage& smem,
                                                   float (&dpt)[1][kQueryTiles][4],
                                                   const AttentionParams& p,
                                                   const Traversal& walk, int j, int warp_key0,
                                                   int group_thread, int lane) {
    const int buffer = j & 1;
    named_barrier_sync(ready_barrier(buffer), kHandoffThreads);
    float pt[1][kQueryTiles][4];
    float(&values)[kHandoverFloats] = flat(pt);
    const float* in = smem.handover[buffer] + group_thread;
#pragma unroll
    for (int i = 0; i < kHandoverFloats; ++i) values[i] = in[i * kGroupThreads];
    if (j + 2 < walk.total) named_barrier_arrive(free_barrier(buffer), kHandoffThreads);
    transposed_score_gradients<C>(dpt, pt, smem.lse_log2[j % kStages], smem.dterm[j % kStages], p,
                                  walk, j, warp_key0, lane);
  }
};

}  // namespace flashgen_device
