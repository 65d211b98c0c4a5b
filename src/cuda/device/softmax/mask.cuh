// What every kernel makes of a score, in one place: the logit (the score
// scaled into the log2 domain, soft-capped where C::kSoftcap, less the ALiBi
// bias where C::kAlibi) and the mask.
// Query i sees key j when j < seq_kv and
//   j <= i + causal_offset   (C::kCausal: causal, or a window's right edge)
//   j >= i + window_offset   (C::kWindow: a sliding window's left edge)
// Both diagonals are offsets from the query index; the host folds causal's
// alignment and the window's sides into them (cuda/kernel_args.cpp). The
// traversals skip the blocks that the diagonals mask wholly
// (scheduler/block_ranges.cuh), and only blocks that cross a diagonal or a
// sequence end are masked element by element. A user mask (C::kMask,
// softmax/user_mask.cuh) is evaluated on the pairs the diagonals leave, in
// the blocks that hold a pair it does not attend.
#pragma once

#include "common.cuh"
#include "scheduler/block_ranges.cuh"
#include "softmax/softmax.cuh"
#include "softmax/user_mask.cuh"

namespace flashgen_device {

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

// The ALiBi slope of (batch, head) in the log2 domain (kAlibi), 0 otherwise.
template <class C>
__device__ __forceinline__ float alibi_slope_log2(const AttentionParams& p, int batch, int head) {
  if constexpr (C::kAlibi)
    return p.alibi_slopes[batch * p.alibi_stride_batch + head * p.alibi_stride_heads] * kLog2e;
  return 0.0f;
}

// Where a block of scores belongs, as logits() and logits_transposed() take
// it: its batch entry and query head (for a user mask) and ALiBi's slope.
struct ScoreSite {
  int batch, head;
  float slope;
};
template <class C>
__device__ __forceinline__ ScoreSite score_site(const AttentionParams& p, int batch, int head) {
  return {batch, head, alibi_slope_log2<C>(p, batch, head)};
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

// ALiBi's bias (log2 domain) of each element of a warp's block of fragments
// (FragmentPositions' layout) of (batch, head) `site`: slope·|key − query −
// diagonal|. The logits subtract it; the soft cap's gradient puts it back
// (subtract_rows_times). Nothing is computed without ALiBi.
template <class C, bool kTransposed>
struct AlibiBias {
  typedef FragmentPositions<kTransposed> At;
  float slope = 0.0f;
  int distance0 = 0;  // of element [0][0][0]
  __device__ __forceinline__ AlibiBias(const AttentionParams& p, const At& at,
                                       const ScoreSite& site) {
    if constexpr (C::kAlibi) {
      slope = site.slope;
      distance0 = at.key0 - at.query0 - p.diagonal_offset;
    }
  }
  __device__ __forceinline__ AlibiBias(const AttentionParams& p, int row0, int col0, int lane,
                                       const ScoreSite& site)
      : AlibiBias(p, At(row0, col0, lane), site) {}
  __device__ __forceinline__ float operator()(int rt, int ct, int i) const {
    const int step = At::key_step(rt, ct, i) - At::query_step(rt, ct, i);
    return slope * static_cast<float>(abs(distance0 + step));
  }
};

// A user mask's verdicts on a warp's block of accumulator fragments
// (FragmentPositions' layout), as bits. The warp evaluates the block a row
// at a time, lane l the columns l, l + 32, ..., and __ballot_sync gathers
// each 32 columns of a row into a word; each lane keeps the words of its own
// rows (g and g + 8 of each row tile). What the mask reads of a column alone
// (user_key_side or user_query_side) is computed once per lane and column
// word, what it reads of a row alone by lane l for row l of each 32 and
// shuffled to the warp, so a pair costs the part that reads both. Pairs
// outside the sequences or the diagonals are not evaluated (their bits are
// 0), as in the reference.
template <class C, bool kTransposed, int kRowTiles, int kColTiles>
struct UserMaskBits {
  static constexpr int kRows = 16 * kRowTiles;
  static constexpr int kCols = 8 * kColTiles;
  static constexpr int kWords = (kCols + 31) / 32;
  typedef typename C::Mask::QuerySide QuerySide;
  typedef typename C::Mask::KeySide KeySide;
  typedef typename select_type<kTransposed, KeySide, QuerySide>::type RowSide;
  typedef typename select_type<kTransposed, QuerySide, KeySide>::type ColumnSide;
  unsigned words[kRowTiles][2][kWords];

  static __device__ __forceinline__ QuerySide query_side(const AttentionParams& p,
                                                         const ScoreSite& site, int query) {
    return user_query_side<C>(p, site.batch, site.head, query);
  }
  static __device__ __forceinline__ KeySide key_side(const AttentionParams& p,
                                                     const ScoreSite& site, int key) {
    return user_key_side<C>(p, site.batch, site.head, key);
  }

  __device__ __forceinline__ UserMaskBits(const AttentionParams& p, const ScoreSite& site,
                                          int row0, int col0, int lane) {
    const int g = lane >> 2;
    ColumnSide columns[kWords];
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      const int col = col0 + 32 * w + lane;
      if constexpr (kTransposed) columns[w] = query_side(p, site, col);
      else columns[w] = key_side(p, site, col);
    }
#pragma unroll 1
    for (int chunk = 0; chunk < kRows; chunk += 32) {
      RowSide mine;  // row chunk + lane's
      if constexpr (kTransposed) mine = key_side(p, site, row0 + chunk + lane);
      else mine = query_side(p, site, row0 + chunk + lane);
#pragma unroll 1
      for (int r = chunk; r < min_of(chunk + 32, kRows); ++r) {
        const RowSide row_side = mine.shuffled(r - chunk);
#pragma unroll
        for (int w = 0; w < kWords; ++w) {
          const int row = row0 + r, col = col0 + 32 * w + lane;
          const int query = kTransposed ? col : row, key = kTransposed ? row : col;
          bool seen = 32 * w + lane < kCols && query < p.seq_q && !is_masked<C>(p, query, key);
          if constexpr (kTransposed)
            seen = seen && user_attends_sides<C>(p, site.batch, site.head, query, key,
                                                 columns[w], row_side);
          else
            seen = seen && user_attends_sides<C>(p, site.batch, site.head, query, key, row_side,
                                                 columns[w]);
          const unsigned word = __ballot_sync(0xffffffffu, seen);
#pragma unroll
          for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
            for (int half = 0; half < 2; ++half)
              if (r == 16 * rt + 8 * half + g) words[rt][half][w] = word;
        }
      }
    }
  }
  // Element [rt][ct][i] of the fragments.
  __device__ __forceinline__ bool attended(int rt, int ct, int i, int lane) const {
    const int col = 8 * ct + 2 * (lane & 3) + (i & 1);
    return (words[rt][i >> 1][8 * ct / 32] >> (col % 32)) & 1u;
  }
};

// Whether the user mask attends every pair of queries [query0, query0 +
// queries) and keys [key0, key0 + keys) of (batch, head) that the
// diagonals leave: every key cell of the block is set in each query cell's
// bits (cells past the keys' end have no pair left).
template <class C>
__device__ __forceinline__ bool wholly_attended(const AttentionParams& p, const ScoreSite& site,
                                                int query0, int queries, int key0, int keys) {
  const int query_cells = mask_query_cells(p), words = mask_full_words(p);
  const unsigned* full =
      p.mask_full_cells + mask_slot(p, site.batch, site.head) * query_cells * words;
  const int first = key0 / kMaskCell;
  const int end = min_of(ceil_div(key0 + keys, kMaskCell), ceil_div(p.seq_kv, kMaskCell));
  const int last = min_of(ceil_div(query0 + queries, kMaskCell), query_cells);
  for (int c = query0 / kMaskCell; c < last; ++c)
    for (int w = first / 32; w * 32 < end; ++w) {
      // Bits [first, end) of word w.
      const int lo = max_of(first - 32 * w, 0), hi = min_of(end - 32 * w, 32);
      const unsigned wanted = (hi == 32 ? ~0u : (1u << hi) - 1) & ~((1u << lo) - 1);
      if ((full[c * words + w] & wanted) != wanted) return false;
    }
  return true;
}

// Masks the elements of s (at FragmentPositions `at`) that a diagonal or a
// sequence end masks; as columns (kTransposed), queries past their sequence.
template <class C, bool kTransposed, int kRowTiles, int kColTiles>
__device__ __forceinline__ void mask_diagonals(float (&s)[kRowTiles][kColTiles][4],
                                               const AttentionParams& p,
                                               const FragmentPositions<kTransposed>& at) {
  typedef FragmentPositions<kTransposed> At;
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

// s: [kRowTiles][kColTiles][4] accumulator fragments over rows row0 on and
// columns col0 on (FragmentPositions), turned into logits (less
// slope·|i + diagonal − j| with ALiBi) and masked where the block needs it,
// then by the user mask where there is one.
// Queries past their sequence are masked only where they are columns
// (kTransposed): there they would add to dK and dV, while as rows their
// outputs are never stored.
template <class C, bool kTransposed, int kRowTiles, int kColTiles>
__device__ __forceinline__ void positioned_logits(float (&s)[kRowTiles][kColTiles][4],
                                                  const AttentionParams& p, int row0, int col0,
                                                  int lane, const ScoreSite& site) {
  typedef FragmentPositions<kTransposed> At;
  to_logits<C>(s, p);
  const At at(row0, col0, lane);
  if constexpr (C::kAlibi) {
    const AlibiBias<C, kTransposed> bias(p, at, site);
    for_each_element(s, [&](float& x, int rt, int ct, int i) { x -= bias(rt, ct, i); });
  }
  const int queries = 8 * (kTransposed ? kColTiles : 2 * kRowTiles);
  const int keys = 8 * (kTransposed ? 2 * kRowTiles : kColTiles);
  const int first_query = kTransposed ? col0 : row0, first_key = kTransposed ? row0 : col0;
  const bool queries_end = kTransposed && first_query + queries > p.seq_q;
  if (queries_end || block_needs_mask<C>(p, first_query, queries, first_key, keys))
    mask_diagonals<C>(s, p, at);
  if constexpr (C::kMask) {
    if (!wholly_attended<C>(p, site, first_query, queries, first_key, keys)) {
      const UserMaskBits<C, kTransposed, kRowTiles, kColTiles> bits(p, site, row0, col0, lane);
      for_each_element(s, [&](float& x, int rt, int ct, int i) {
        if (!bits.attended(rt, ct, i, lane)) x = kMaskedScore;
      });
    }
  }
}

// Query rows from row0 against key columns from key0.
template <class C, int kRowTiles, int kColTiles>
__device__ __forceinline__ void logits(float (&s)[kRowTiles][kColTiles][4],
                                       const AttentionParams& p, int row0, int key0, int lane,
                                       const ScoreSite& site) {
  positioned_logits<C, false>(s, p, row0, key0, lane, site);
}

// Key rows from key0 against query columns from query0 (Sᵀ).
template <class C, int kRowTiles, int kColTiles>
__device__ __forceinline__ void logits_transposed(float (&s)[kRowTiles][kColTiles][4],
                                                  const AttentionParams& p, int key0, int query0,
                                                  int lane, const ScoreSite& site) {
  positioned_logits<C, true>(s, p, key0, query0, lane, site);
}

}  // namespace flashgen_device
