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
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int ct = 0; ct < kColTiles; ++ct)
#pragma unroll
        for (int i = 0; i < 4; ++i) s[rt][ct][i] = logit<C>(s[rt][ct][i], p);
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

// s: [kRowTiles][kColTiles][4] accumulator fragments (C layout of m16n8k16)
// covering query rows row0 + 16·rt + {g, g+8} and key columns
// key0 + 8·ct + 2t + {0, 1}: turned into logits (less slope·|i + diagonal
// − j| with ALiBi), and masked where the block needs it. (Rows past the
// query sequence are not masked: their outputs are never stored.)
template <class C, int kRowTiles, int kColTiles>
__device__ __forceinline__ void logits(float (&s)[kRowTiles][kColTiles][4],
                                       const AttentionParams& p, int row0, int key0, int lane,
                                       float slope) {
  to_logits<C>(s, p);
  const int g = lane >> 2, t = lane & 3;
  if constexpr (C::kAlibi) {
    // key − query − diagonal of element [0][0][0], each element an immediate away.
    const int distance0 = key0 - row0 + 2 * t - g - p.diagonal_offset;
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int ct = 0; ct < kColTiles; ++ct)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int step = ct * 8 + (i & 1) - rt * 16 - (i >= 2 ? 8 : 0);
          s[rt][ct][i] -= slope * static_cast<float>(abs(distance0 + step));
        }
  }
  if (!block_needs_mask<C>(p, row0, 16 * kRowTiles, key0, 8 * kColTiles)) return;
  if constexpr (C::kWindow) {
    // Both diagonals as compares of key − query against them: three
    // registers for the block (the offsets of the first element), each
    // element then an immediate away from them.
    const int diagonal = key0 - row0 + 2 * t - g;  // key − query of element [0][0][0]
    const int past = diagonal - p.causal_offset, before = diagonal - p.window_offset;
    const int end = key0 + 2 * t - p.seq_kv;
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int ct = 0; ct < kColTiles; ++ct)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int column = ct * 8 + (i & 1), step = column - rt * 16 - (i >= 2 ? 8 : 0);
          if (end + column >= 0 || (C::kCausal && past + step > 0) || before + step < 0)
            s[rt][ct][i] = kMaskedScore;
        }
    return;
  }
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int ct = 0; ct < kColTiles; ++ct)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = row0 + rt * 16 + g + (i >= 2 ? 8 : 0);
        const int col = key0 + ct * 8 + 2 * t + (i & 1);
        if (is_masked<C>(p, row, col)) s[rt][ct][i] = kMaskedScore;
      }
}

// The same for transposed fragments (rows are keys from key0, columns are
// queries from query0), as the key/value backward kernels hold Sᵀ. Columns
// past the query sequence are masked too: they would add to dK and dV.
template <class C, int kRowTiles, int kColTiles>
__device__ __forceinline__ void logits_transposed(float (&s)[kRowTiles][kColTiles][4],
                                                  const AttentionParams& p, int key0, int query0,
                                                  int lane, float slope) {
  to_logits<C>(s, p);
  const int g = lane >> 2, t = lane & 3;
  if constexpr (C::kAlibi) {  // as in logits()
    const int distance0 = key0 - query0 + g - 2 * t - p.diagonal_offset;
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int ct = 0; ct < kColTiles; ++ct)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int step = rt * 16 + (i >= 2 ? 8 : 0) - ct * 8 - (i & 1);
          s[rt][ct][i] -= slope * static_cast<float>(abs(distance0 + step));
        }
  }
  if (query0 + 8 * kColTiles <= p.seq_q &&
      !block_needs_mask<C>(p, query0, 8 * kColTiles, key0, 16 * kRowTiles))
    return;
  if constexpr (C::kWindow) {  // as in logits()
    const int diagonal = key0 - query0 + g - 2 * t;  // key − query of element [0][0][0]
    const int past = diagonal - p.causal_offset, before = diagonal - p.window_offset;
    const int key_end = key0 + g - p.seq_kv, query_end = query0 + 2 * t - p.seq_q;
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int ct = 0; ct < kColTiles; ++ct)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key_step = rt * 16 + (i >= 2 ? 8 : 0), query_step = ct * 8 + (i & 1);
          const int step = key_step - query_step;
          if (key_end + key_step >= 0 || query_end + query_step >= 0 ||
              (C::kCausal && past + step > 0) || before + step < 0)
            s[rt][ct][i] = kMaskedScore;
        }
    return;
  }
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int ct = 0; ct < kColTiles; ++ct)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = key0 + rt * 16 + g + (i >= 2 ? 8 : 0);
        const int query = query0 + ct * 8 + 2 * t + (i & 1);
        if (query >= p.seq_q || is_masked<C>(p, query, key)) s[rt][ct][i] = kMaskedScore;
      }
}

}  // namespace flashgen_device
