// The wgmma key/value backward for heads too wide for dK and dV of 64 keys
// to share the register file (each up to 512 columns; split=dims). Two
// kinds of CTA take each block of 64 keys: one accumulates dV, the other
// dK, so each holds one output; inside a CTA two computing warpgroups split
// the head dims, as the query kernel's split=dims does:
//
//   dV CTA:  Sᵀ_g = K[:, half g]·Q[:, half g]ᵀ        wgmma
//            Sᵀ = Sᵀ_0 + Sᵀ_1, Pᵀ                      shared memory, as in
//            dV[:, half g] += Pᵀ·dO[:, half g]         pipeline/warpgroup_exchange.cuh
//   dK CTA:  Sᵀ_g, dPᵀ_g = V[:, half g]·dO[:, half g]ᵀ
//            Sᵀ, dPᵀ, Pᵀ, dSᵀ
//            dK[:, half g] += dSᵀ·Q[:, half g]
//
// Five GEMMs instead of four (Sᵀ twice), against the mma.sync kernel's
// column chunks, which recompute Sᵀ and dPᵀ per chunk (pairing the two
// CTAs in a cluster to share Q and dO, or to hand Pᵀ over, measured slower:
// docs/experiments.md). A producer warpgroup copies the traversed Q and dO by TMA with
// their rows' L2 and Dterm (the dV CTA reads no Dterm); block j's stage is
// read until the product of block j, one block later. K, V, Q and dO are
// zero-filled to a multiple of 32 columns, so both warpgroups run the same
// instructions. Deterministic: no atomics, a fixed order; GQA summed
// inside the CTA.
//
// Operands kept in registers (cache=K, cache=V): the dV CTA may hold its
// half of K and the dK CTA its half of V as the A fragments of Sᵀ and dPᵀ
// (Dqk / 4, Dv / 4 registers a thread beside the half of dV, dK), read from
// global memory once. Each such GEMM then reads only the query tile from
// shared memory: with 16-query blocks, K's tile is four times the bytes of
// Q's, and shared memory bandwidth, not the tensor cores, set the pace. A
// V in registers also leaves V's tile out of shared memory, room for a
// deeper pipeline.
//
// Rows that are not 16-byte aligned (odd head dims) go by TMA too where the
// heads are adjacent in each token's row and every key/value head has one
// query head, as in kernels/backward_key_value/wgmma_producer.cuh: Q and dO
// through token-row views, K and dK shifted as Q, V and dV as dO, and the
// producer warpgroup's second warp zeroes the other heads' columns of each
// Q and dO stage.
#pragma once

#include "kernels/backward_key_value/wgmma_producer.cuh"
#include "layout/shared_memory.cuh"
#include "pipeline/warpgroup_exchange.cuh"
#include "kernels/backward_key_value/wgmma_dims_steps.cuh"
#include "arch/wgmma_gemm.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// C (generated): kElement, kDimQK, kDimV, kWarps (8: two computing
// warpgroups), kBlockN, kVec (8; 4, 2 or 1: token rows), kCausal, kTma
// (true), kSwizzle, kStages,
// kHeadChunks (2: the dV and the dK CTA of each key block), kCacheK (the
// dV CTA's K in registers), kCacheV (the dK CTA's V in registers).
template <class C>
struct BackwardKeyValueWgmmaDims : BackwardKeyValueWgmmaDimsSteps<C> {
  typedef BackwardKeyValueWgmmaDimsSteps<C> Steps;
  using Steps::E, Steps::kBlockM, Steps::kBlockN, Steps::kDimQK, Steps::kDimV, Steps::kHalfQK;
  using Steps::kHalfV, Steps::kStages, Steps::kQueryTiles, Steps::kConsumerWarps;
  using Steps::kBothGroups, Steps::kKeysInRegisters, Steps::kValuesInRegisters;
  using Steps::kKeyTileElements, Steps::kValueTileElements, Steps::kScoreFloats;
  using Steps::kFragmentWords, Steps::kPartialsBarrier, Steps::kFragmentsBarrier, Steps::kTokenRows;
  using typename Steps::Roles, typename Steps::Registers, typename Steps::Traversal;
  using typename Steps::Queries, typename Steps::GradOs, typename Steps::SharedStorage;
  using Steps::key_half_descriptor, Steps::value_half_descriptor, Steps::query_half;
  using Steps::grad_o_half, Steps::half_scores, Steps::half_grad_scores;
  using Steps::half_value_product, Steps::half_key_product;

  static __device__ void run(const AttentionParams& p, const TraversedTensorMaps& maps,
                             unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    // The dV and dK CTAs of a key block: its two column chunks.
    const CtaTile tile = key_tile<kBlockM, 2, C::kCausal>();
    const int kv_head = tile.head, batch = tile.batch, key0 = tile.row0;
    const bool grad_keys = tile.chunk == 1;  // this CTA's output: dK, else dV
    const Traversal walk = Traversal::template of<C>(p, tile, kBlockM);
    // Token rows: one query head, the kv head's (the host's rule).
    const HeadShifts shifts = head_shifts<C, kTokenRows>(walk.first_head);  // Q's and dO's

    if (thread == 0) {
      smem.pipeline.init(kConsumerWarps * 32, kQueryBlockArrivals);
      if constexpr (kTokenRows) smem.fixed.init(1, 32);  // each lane of the fixing warp
    }
    if (warp < kConsumerWarps) {
      const u16* k = head_slice<const u16>(p.k, batch, kv_head) + key0 * p.k.stride_seq;
      if (grad_keys || !kKeysInRegisters)
        copy_head_rows<kBlockM, kDimQK, C::kVec, kBothGroups, kTokenRows>(
            smem.k, k, p.k.stride_seq, p.seq_kv - key0, C::kDimQK, shifts.qk, thread);
      if (grad_keys && !kValuesInRegisters) {
        const u16* v = head_slice<const u16>(p.v, batch, kv_head) + key0 * p.v.stride_seq;
        copy_head_rows<kBlockM, kDimV, C::kVec, kBothGroups, kTokenRows>(
            smem.v, v, p.v.stride_seq, p.seq_kv - key0, C::kDimV, shifts.v, thread);
      }
    }
    if (!start_query_block_producer<kDimQK, kDimV, C::kDimQK, C::kDimV, C::kSwizzle, Roles,
                                    kTokenRows>(smem, maps, p, walk, batch, shifts, thread))
      return;
    // The warpgroup, broadcast so that the compiler sees a warp-uniform
    // value: the branches on it hold wgmma instructions.
    const int group = __shfl_sync(0xffffffffu, warp / 4, 0);
    const int group_thread = thread & (kWarpgroupThreads - 1);
    const int warp_key0 = key0 + (warp & 3) * 16;  // both warpgroups cover the same keys
    if (grad_keys) {
      float dk[1][kHalfQK / 8][4];
      accumulate_keys(smem, p, walk, dk, batch, kv_head, shifts, group, group_thread, warp_key0,
                      lane);
      store_tile_columns_times<E, C::kVec>(p.grad_k, batch, kv_head, warp_key0, group * kHalfQK,
                                           dk, p.scale, p.seq_kv - warp_key0, C::kDimQK, lane,
                                           shifts.qk);
    } else {
      float dv[1][kHalfV / 8][4];
      accumulate_values(smem, p, walk, dv, batch, kv_head, shifts, group, group_thread, warp_key0,
                        lane);
      store_tile_columns_times<E, C::kVec>(p.grad_v, batch, kv_head, warp_key0, group * kHalfV,
                                           dv, 1.0f, p.seq_kv - warp_key0, C::kDimV, lane,
                                           shifts.v);
    }
  }

  // The dV CTA: Sᵀ_g(j) beside dV_g += Pᵀ(j−1)·dO(j−1).
  static __device__ __forceinline__ void accumulate_values(SharedStorage& smem,
                                                           const AttentionParams& p,
                                                           const Traversal& walk,
                                                           float (&dv)[1][kHalfV / 8][4], int batch,
                                                           int kv_head, const HeadShifts& shifts,
                                                           int group, int group_thread,
                                                           int warp_key0, int lane) {
    const u64 k_desc = key_half_descriptor(smem, group);
    const int q_half = query_half(group), o_half = grad_o_half(group);
    u32 k_frag[kHalfQK / 16][4];  // unused (no registers) unless K is held
    if constexpr (kKeysInRegisters)
      load_a_fragments_global<kHalfQK / 16, C::kVec>(k_frag, p.k, batch, kv_head, warp_key0,
                                                     p.seq_kv, group * kHalfQK, C::kDimQK, lane,
                                                     shifts.qk);
    traverse(
        smem, walk.total, dv,
        [&](float(&st)[1][kQueryTiles][4], float(&)[1][kQueryTiles][4], int j) {
          if constexpr (kKeysInRegisters)
            half_scores_from_registers<Queries>(st, k_frag, smem.q[j % kStages], q_half);
          else
            half_scores(st, k_desc, smem.q[j % kStages], q_half);
        },
        [&](const u32(&pt_frag)[kBlockN / 16][1][4], int j) {
          half_value_product(dv, pt_frag, smem.grad_o[j % kStages], o_half);
        },
        [&](float(&st)[1][kQueryTiles][4], float(&)[1][kQueryTiles][4], int j) {
          sum_partials(smem.partial, kPartialsBarrier, group, group_thread, st);
          transposed_probabilities<C>(st, smem.lse_log2[j % kStages], p, walk, j, warp_key0, lane);
        },
        group, group_thread);
  }

  // The dK CTA: Sᵀ_g(j) and dPᵀ_g(j) beside dK_g += dSᵀ(j−1)·Q(j−1).
  static __device__ __forceinline__ void accumulate_keys(SharedStorage& smem,
                                                         const AttentionParams& p,
                                                         const Traversal& walk,
                                                         float (&dk)[1][kHalfQK / 8][4], int batch,
                                                         int kv_head, const HeadShifts& shifts,
                                                         int group, int group_thread,
                                                         int warp_key0, int lane) {
    const u64 k_desc = key_half_descriptor(smem, group);
    const u64 v_desc = value_half_descriptor(smem, group);
    const int q_half = query_half(group), o_half = grad_o_half(group);
    u32 v_frag[kHalfV / 16][4];  // unused (no registers) unless V is held
    if constexpr (kValuesInRegisters)
      load_a_fragments_global<kHalfV / 16, C::kVec>(v_frag, p.v, batch, kv_head, warp_key0,
                                                    p.seq_kv, group * kHalfV, C::kDimV, lane,
                                                    shifts.v);
    // dPᵀ (then dSᵀ, the product's A operand) first, Sᵀ (then Pᵀ) second.
    traverse(
        smem, walk.total, dk,
        [&](float(&dpt)[1][kQueryTiles][4], float(&st)[1][kQueryTiles][4], int j) {
          half_scores(st, k_desc, smem.q[j % kStages], q_half);
          if constexpr (kValuesInRegisters)
            half_scores_from_registers<GradOs>(dpt, v_frag, smem.grad_o[j % kStages], o_half);
          else
            half_grad_scores(dpt, v_desc, smem.grad_o[j % kStages], o_half);
        },
        [&](const u32(&dst_frag)[kBlockN / 16][1][4], int j) {
          half_key_product(dk, dst_frag, smem.q[j % kStages], q_half);
        },
        [&](float(&dpt)[1][kQueryTiles][4], float(&st)[1][kQueryTiles][4], int j) {
          sum_partials(smem.partial, kPartialsBarrier, group, group_thread, st, dpt);
          transposed_probabilities<C>(st, smem.lse_log2[j % kStages], p, walk, j, warp_key0, lane);
          transposed_score_gradients<C>(dpt, st, smem.lse_log2[j % kStages],
                                        smem.dterm[j % kStages], p, walk, j, warp_key0, lane);
        },
        group, group_thread);
  }

  // One warpgroup's loop over the traversed blocks, accumulating into acc:
  // gemms(a, b, j) issues block j's GEMMs (overwriting a and b, the dV CTA
  // only a), product(frag, j) its product of block j, side(a, b, j) the
  // exchange and the element-wise work, leaving the product's A operand in
  // a (own rows); block j's GEMMs run beside block j−1's product, the side
  // while the product still runs. Blocks 0 and n are peeled off, so no
  // wgmma sits in a branch.
  template <int kAccTiles, class Gemms, class Product, class Side>
  static __device__ __forceinline__ void traverse(SharedStorage& smem, int total,
                                                  float (&acc)[1][kAccTiles][4], Gemms gemms,
                                                  Product product, Side side, int group,
                                                  int group_thread) {
    zero(acc);
    u32 frag[kBlockN / 16][1][4];  // block j−1's A fragments
    if (total > 0) {
      query_block_ready<kTokenRows>(smem, 0);
      float a[1][kQueryTiles][4], b[1][kQueryTiles][4];
      wgmma_fence();
      gemms(a, b, 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(a));
      fence_registers(flat(b));
      side(a, b, 0);
      pack_and_exchange(smem, frag, a, group, group_thread);
    }
    for (int j = 1; j < total; ++j) {
      query_block_ready<kTokenRows>(smem, j);
      float a[1][kQueryTiles][4], b[1][kQueryTiles][4];
      fence_registers(flat(acc));
      wgmma_fence();
      gemms(a, b, j);
      wgmma_commit();
      product(frag, j - 1);
      wgmma_commit();
      wgmma_wait<1>();  // block j's GEMMs are done; block j−1's product may still run
      fence_registers(flat(a));
      fence_registers(flat(b));
      side(a, b, j);
      wgmma_wait<0>();  // the A fragments of block j−1 are free
      fence_registers(flat(acc));
      smem.pipeline.release_each(j - 1);  // this thread read its row statistics
      pack_and_exchange(smem, frag, a, group, group_thread);
    }
    if (total > 0) {
      fence_registers(flat(acc));
      wgmma_fence();
      product(frag, total - 1);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(acc));
      smem.pipeline.release_each(total - 1);
    }
  }

  // Packs this warpgroup's rows of Pᵀ (dSᵀ) as A fragments, hands its words
  // over and takes the other's.
  static __device__ __forceinline__ void pack_and_exchange(SharedStorage& smem,
                                                           u32 (&frag)[kBlockN / 16][1][4],
                                                           const float (&a)[1][kQueryTiles][4],
                                                           int group, int group_thread) {
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) pack_a_from_acc<E>(frag[ks], a, ks);
    exchange_words(smem.fragments, kFragmentsBarrier, group, group_thread, frag);
  }

  // Issues Sᵀ_g (dPᵀ_g) from K_g's (V_g's) A fragments held in registers
  // and the query (dO) tile read K-major, overwriting scores.
  template <class Tile, int kSteps>
  static __device__ __forceinline__ void half_scores_from_registers(
      float (&scores)[1][kQueryTiles][4], const u32 (&frag)[kSteps][4], const u16* tile,
      int half) {
    gemm_registers<E, Tile::kKMajorStep>(flat(scores), frag, Tile::k_major(tile) + half);
  }
};

}  // namespace flashgen_device
