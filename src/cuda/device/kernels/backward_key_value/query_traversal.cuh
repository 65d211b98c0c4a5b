// What every key/value backward on wgmma shares about the query blocks a
// CTA traverses (their order: scheduler/query_blocks.cuh): the transposed
// probabilities of a warp's keys against one block, and the copy of the
// CTA's K and V rows into their core-matrix tiles.
#pragma once

#include "common.cuh"
#include "copy/tile_copy.cuh"
#include "arch/wgmma.cuh"
#include "softmax/mask.cuh"
#include "softmax/row_stats.cuh"
#include "softmax/softmax.cuh"
#include "scheduler/query_blocks.cuh"
#include "arch/tma.cuh"

namespace flashgen_device {

// Pᵀ = exp2(Sᵀ·scale·log2e − L2[query]) in st, the scores of one warp's 16
// keys from warp_key0 against the traversed block's queries from query0,
// masked where the block crosses a sequence end or a diagonal; l2: the
// block's L2 per query; the block is traversed block j of `walk` (the wgmma
// key/value kernels).
template <class C, int kQueryTiles, class Traversal>
__device__ __forceinline__ void transposed_probabilities(float (&st)[1][kQueryTiles][4],
                                                         const float* l2, const AttentionParams& p,
                                                         const Traversal& walk, int j,
                                                         int warp_key0, int lane) {
  logits_transposed<C>(st, p, warp_key0, walk.query0_of(j), lane,
                       score_site<C>(p, walk.batch, walk.head_of(j)));
  exp2_columns(st, l2, lane);
}

// dSᵀ = Pᵀ ∘ (dPᵀ − Dterm[query]) in dpt for the same warp and block
// (subtract_columns_times, ALiBi's bias found from the block's positions).
template <class C, int kQueryTiles, class Traversal>
__device__ __forceinline__ void transposed_score_gradients(float (&dpt)[1][kQueryTiles][4],
                                                           const float (&pt)[1][kQueryTiles][4],
                                                           const float* l2, const float* dterm,
                                                           const AttentionParams& p,
                                                           const Traversal& walk, int j,
                                                           int warp_key0, int lane) {
  const AlibiBias<C, true> bias(p, warp_key0, walk.query0_of(j), lane,
                                score_site<C>(p, walk.batch, walk.head_of(j)));
  subtract_columns_times<C>(dpt, pt, l2, dterm, p, lane, bias);
}

// Copies a key/value CTA's kKeyRows rows of K and V, from key0 on, into
// their core-matrix tiles of kTileQK and kTileV columns, kThreads threads
// from `thread` on sharing them: rows aligned to 4 bytes or more by
// cp.async (issued only); on token rows by aligned loads shifted in
// registers, K's columns from Q's shift, V's from dO's (Sᵀ = K·Qᵀ and dPᵀ =
// V·dOᵀ sum over them: arch/tma.cuh's HeadShifts of the query head).
template <class C, int kKeyRows, int kThreads, int kTileQK = round_up(C::kDimQK, 16),
          int kTileV = round_up(C::kDimV, 16), bool kTokenRows = false>
__device__ __forceinline__ void copy_key_value_rows(u16* k_tile, u16* v_tile,
                                                    const AttentionParams& p, int batch,
                                                    int kv_head, int key0, int thread,
                                                    HeadShifts shifts = {0, 0}) {
  const u16* k = head_slice<const u16>(p.k, batch, kv_head) + key0 * p.k.stride_seq;
  const u16* v = head_slice<const u16>(p.v, batch, kv_head) + key0 * p.v.stride_seq;
  copy_head_rows<kKeyRows, kTileQK, C::kVec, kThreads, kTokenRows>(
      k_tile, k, p.k.stride_seq, p.seq_kv - key0, C::kDimQK, shifts.qk, thread);
  copy_head_rows<kKeyRows, kTileV, C::kVec, kThreads, kTokenRows>(
      v_tile, v, p.v.stride_seq, p.seq_kv - key0, C::kDimV, shifts.v, thread);
}

}  // namespace flashgen_device
