// What every kernel makes of a score, in one place: the logit (the score
// scaled into the log2 domain, soft-capped where C::kSoftcap, less the ALiBi
// bias where C::kAlibi) and the mask.
// Query i sees key j when j < seq_kv and
//   j <= i + causal_offset   (C::kCausal: causal, or a window's right edge)
//   j >= i + window_offset   (C::kWindow: a sliding window's left edge)
// Both diagonals are offsets from the query index; the host folds causal's
// alignment and the window's sides into them (cuda/kernel_args.cpp). The
// traversals skip the blocks that the diagonals mask wholly, and only blocks
// that cross a diagonal or a sequence end are masked element by element.
#pragma once

#include "common.cuh"
#include "softmax/softmax.cuh"

namespace flashgen_device {

// Blocks [first, end) of a traversal (key blocks of a query tile, or query
// blocks of a key tile), first <= end.
struct BlockRange {
  int first, end;
  __device__ __forceinline__ int count() const { return end - first; }
};

// Key blocks of kBlockN a CTA owning query rows [row0, row0 + rows)
// traverses: under the causal diagonal those up to the diagonal of its last
// row (none when that row sees no key), under the window's left edge those
// from the edge of its first row on.
template <class C, int kBlockN>
__device__ __forceinline__ BlockRange key_blocks_for_rows(const AttentionParams& p, int row0,
                                                          int rows) {
  int end = ceil_div(p.seq_kv, kBlockN);
  if (C::kCausal) {
    const int last_key = min_of(row0 + rows - 1, p.seq_q - 1) + p.causal_offset;
    end = min_of(end, last_key < 0 ? 0 : ceil_div(last_key + 1, kBlockN));
  }
  int first = 0;
  if (C::kWindow) first = min_of(end, max_of(0, row0 + p.window_offset) / kBlockN);
  return {first, end};
}

// Query blocks of kBlockN that see keys [key0, key0 + keys): key j is seen
// by queries i >= j - causal_offset (causal) and i <= j - window_offset
// (window).
template <class C, int kBlockN>
__device__ __forceinline__ BlockRange query_blocks_for_keys(const AttentionParams& p, int key0,
                                                            int keys) {
  int end = ceil_div(p.seq_q, kBlockN);
  if (C::kWindow) {
    const int last_query = key0 + keys - 1 - p.window_offset;
    end = min_of(end, last_query < 0 ? 0 : last_query / kBlockN + 1);
  }
  const int first = C::kCausal ? min_of(end, max_of(0, key0 - p.causal_offset) / kBlockN) : 0;
  return {first, end};
}

// Whether some pair of queries [query0, query0 + queries) and keys
// [key0, key0 + keys) is masked: the block crosses the key sequence's end
// or a diagonal.
template <class C>
__device__ __forceinline__ bool block_needs_mask(const AttentionParams& p, int query0, int queries,
                                                 int key0, int keys) {
  return key0 + keys > p.seq_kv || (C::kCausal && key0 + keys - 1 > query0 + p.causal_offset) ||
         (C::kWindow && key0 < query0 + queries - 1 + p.window_offset);
}

template <class C>
__device__ __forceinline__ bool is_masked(const AttentionParams& p, int query, int key) {
  return key >= p.seq_kv || (C::kCausal && key > query + p.causal_offset) ||
         (C::kWindow && key < query + p.window_offset);
}

// A score's logit in the log2 domain: s·scale·log2(e), or under the soft
// cap c, c·tanh(s·scale / c)·log2(e) (ALiBi's bias comes after, from the
// positions: logits(), the fp32 kernels).
template <class C>
__device__ __forceinline__ float logit(float score, const AttentionParams& p) {
  if constexpr (C::kSoftcap) return p.softcap_log2 * fast_tanh(score * p.softcap_scale);
  return score * p.scale_log2;
}

template <class C, int kRowTiles, int kColTiles>
__device__ __forceinline__ void to_logits(float (&s)[kRowTiles][kColTiles][4],
                                          const AttentionParams& p) {
  if constexpr (C::kSoftcap) {
    for_each_element(s, [&](float& x, int, int, int) { x = logit<C>(x, p); });
  } else {
    scale_scores(s, p.scale_log2);
  }
}

// The ALiBi slope of (batch, head) in the log2 domain (kAlibi), 0 otherwise:
// what logits() and logits_transposed() take as `slope`.
template <class C>
__device__ __forceinline__ float alibi_slope_log2(const AttentionParams& p, int batch, int head) {
  if constexpr (C::kAlibi)
    return p.alibi_slopes[batch * p.alibi_stride_batch + head * p.alibi_stride_heads] * kLog2e;
  return 0.0f;
}

// ALiBi's bias of one (query, key) pair, for the kernels that take scores
// one at a time (fp32): slope·|key − query − diagonal|; 0 without ALiBi.
template <class C>
__device__ __forceinline__ float alibi_bias(float slope, const AttentionParams& p, int query,
                                            int key) {
  if constexpr (C::kAlibi) return slope * static_cast<float>(abs(key - query - p.diagonal_offset));
  return 0.0f;
}

// Where the elements of a thread's accumulator fragments (C layout of
// m16n8k16) lie: element [rt][ct][i] holds row row0 + 16·rt + g + 8·(i ≥ 2)
// and column col0 + 8·ct + 2t + (i & 1) (g = lane / 4, t = lane % 4). Rows
// are queries and columns keys, or the other way round where kTransposed
// (the key/value backward's Sᵀ). Each element's key and query are the
// first element's plus a compile-time step.
template <bool kTransposed>
struct FragmentPositions {
  int query0, key0;  // of element [0][0][0]
  __device__ __forceinline__ FragmentPositions(int row0, int col0, int lane) {
    const int row = row0 + (lane >> 2), col = col0 + 2 * (lane & 3);
    query0 = kTransposed ? col : row;
    key0 = kTransposed ? row : col;
  }
  static constexpr __device__ int row_step(int rt, int i) { return rt * 16 + (i >= 2 ? 8 : 0); }
  static constexpr __device__ int col_step(int ct, int i) { return ct * 8 + (i & 1); }
  static constexpr __device__ int query_step(int rt, int ct, int i) {
    return kTransposed ? col_step(ct, i) : row_step(rt, i);
  }
  static constexpr __device__ int key_step(int rt, int ct, int i) {
    return kTransposed ? row_step(rt, i) : col_step(ct, i);
  }
};

// s: [kRowTiles][kColTiles][4] accumulator fragments over rows row0 on and
// columns col0 on (FragmentPositions), turned into logits (less
// slope·|i + diagonal − j| with ALiBi) and masked where the block needs it.
// Queries past their sequence are masked only where they are columns
// (kTransposed): there they would add to dK and dV, while as rows their
// outputs are never stored.
template <class C, bool kTransposed, int kRowTiles, int kColTiles>
__device__ __forceinline__ void positioned_logits(float (&s)[kRowTiles][kColTiles][4],
                                                  const AttentionParams& p, int row0, int col0,
                                                  int lane, float slope) {
  typedef FragmentPositions<kTransposed> At;
  to_logits<C>(s, p);
  const At at(row0, col0, lane);
  if constexpr (C::kAlibi) {
    const int distance0 = at.key0 - at.query0 - p.diagonal_offset;
    for_each_element(s, [&](float& x, int rt, int ct, int i) {
      const int step = At::key_step(rt, ct, i) - At::query_step(rt, ct, i);
      x -= slope * static_cast<float>(abs(distance0 + step));
    });
  }
  const int queries = 8 * (kTransposed ? kColTiles : 2 * kRowTiles);
  const int keys = 8 * (kTransposed ? 2 * kRowTiles : kColTiles);
  const int first_query = kTransposed ? col0 : row0, first_key = kTransposed ? row0 : col0;
  const bool queries_end = kTransposed && first_query + queries > p.seq_q;
  if (!queries_end && !block_needs_mask<C>(p, first_query, queries, first_key, keys)) return;
  if constexpr (C::kWindow) {
    // Both diagonals as compares of key − query against them: a few
    // registers for the block, each element an immediate away from them.
    const int diagonal = at.key0 - at.query0;
    const int past = diagonal - p.causal_offset, before = diagonal - p.window_offset;
    const int key_end = at.key0 - p.seq_kv, query_end = at.query0 - p.seq_q;
    for_each_element(s, [&](float& x, int rt, int ct, int i) {
      const int key_step = At::key_step(rt, ct, i), query_step = At::query_step(rt, ct, i);
      const int step = key_step - query_step;
      if (key_end + key_step >= 0 || (kTransposed && query_end + query_step >= 0) ||
          (C::kCausal && past + step > 0) || before + step < 0)
        x = kMaskedScore;
    });
  } else {
    for_each_element(s, [&](float& x, int rt, int ct, int i) {
      const int query = at.query0 + At::query_step(rt, ct, i);
      const int key = at.key0 + At::key_step(rt, ct, i);
      if ((kTransposed && query >= p.seq_q) || is_masked<C>(p, query, key)) x = kMaskedScore;
    });
  }
}

// Query rows from row0 against key columns from key0.
template <class C, int kRowTiles, int kColTiles>
__device__ __forceinline__ void logits(float (&s)[kRowTiles][kColTiles][4],
                                       const AttentionParams& p, int row0, int key0, int lane,
                                       float slope) {
  positioned_logits<C, false>(s, p, row0, key0, lane, slope);
}

// Key rows from key0 against query columns from query0 (Sᵀ).
template <class C, int kRowTiles, int kColTiles>
__device__ __forceinline__ void logits_transposed(float (&s)[kRowTiles][kColTiles][4],
                                                  const AttentionParams& p, int key0, int query0,
                                                  int lane, float slope) {
  positioned_logits<C, true>(s, p, key0, query0, lane, slope);
}

}  // namespace flashgen_device
