// Online softmax in the log2 domain over a warp's score fragments.
//
// Each thread holds, per 16-row tile, two rows (g and g+8); the four threads
// of a quad (same g) hold the row's columns between them, so row reductions
// are a thread-local pass plus two xor-shuffles.
#pragma once

#include "common.cuh"

namespace flashgen_device {

__device__ __forceinline__ float quad_max(float x) {
  x = max_of(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return max_of(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The exponent base for a row whose running maximum is `row_max`: a row with
// every score masked so far uses 0, so exp2(masked - 0) is 0 rather than 1.
__device__ __forceinline__ float softmax_base(float row_max) {
  return row_max < kMaskedThreshold ? 0.0f : row_max;
}

template <int kRowTiles, int kColTiles>
__device__ __forceinline__ void scale_scores(float (&s)[kRowTiles][kColTiles][4], float factor) {
  for_each_element(s, [&](float& x, int, int, int) { x *= factor; });
}

// Running statistics of the rows a thread holds: [kRowTiles][2 rows].
template <int kRowTiles>
struct OnlineSoftmax {
  float row_max[kRowTiles][2];  // running max of scaled scores (log2 domain)
  float row_sum[kRowTiles][2];  // this thread's share of sum(exp2(s - base))

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_max[rt][h] = kMaskedScore;
        row_sum[rt][h] = 0.0f;
      }
  }

  // s holds scaled scores (log2 domain) of one key block; on return it holds
  // P = exp2(s - base). correction[rt][h] is the factor by which the output
  // accumulated so far must be multiplied.
  template <int kColTiles>
  __device__ __forceinline__ void update(float (&s)[kRowTiles][kColTiles][4],
                                         float (&correction)[kRowTiles][2]) {
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float block_max = kMaskedScore;
#pragma unroll
        for (int ct = 0; ct < kColTiles; ++ct)
          block_max = max_of(block_max, max_of(s[rt][ct][2 * h], s[rt][ct][2 * h + 1]));
        const float new_max = max_of(row_max[rt][h], quad_max(block_max));
        const float base = softmax_base(new_max);
        // From the old maximum itself: before a row's first visible key it is
        // kMaskedScore, whose exp2 against any base is 0. (Its softmax_base,
        // 0, overflowed exp2 against a base below -128, as ALiBi's far keys
        // give, and 0 · inf made the row's sum NaN.)
        correction[rt][h] = fast_exp2(row_max[rt][h] - base);
        row_max[rt][h] = new_max;
        float sum = 0.0f;
#pragma unroll
        for (int ct = 0; ct < kColTiles; ++ct) {
          s[rt][ct][2 * h] = fast_exp2(s[rt][ct][2 * h] - base);
          s[rt][ct][2 * h + 1] = fast_exp2(s[rt][ct][2 * h + 1] - base);
          sum += s[rt][ct][2 * h] + s[rt][ct][2 * h + 1];
        }
        row_sum[rt][h] = row_sum[rt][h] * correction[rt][h] + sum;
      }
    }
  }

  // After the last block: the factor that normalizes the output, and the
  // log-sum-exp in natural log. With a sink (kSink; sink_log2 its logit in
  // the log2 domain) the denominator also holds exp2(sink_log2), so a row
  // with no visible key gets LSE = the sink; otherwise that row gets -inf.
  template <bool kSink = false>
  __device__ __forceinline__ void finish(float (&inverse_sum)[kRowTiles][2],
                                         float (&lse)[kRowTiles][2], float sink_log2 = 0.0f) {
    if constexpr (kSink) {
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // Both terms relative to the larger of the base and the sink, so
          // neither overflows.
          const float base = softmax_base(row_max[rt][h]), top = max_of(base, sink_log2);
          const float rescale = fast_exp2(base - top);
          const float sum = quad_sum(row_sum[rt][h]) * rescale + fast_exp2(sink_log2 - top);
          inverse_sum[rt][h] = rescale / sum;
          lse[rt][h] = (top + fast_log2(sum)) * kLn2;
        }
      return;
    }
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float sum = quad_sum(row_sum[rt][h]);
        const bool empty = !(sum > 0.0f);
        inverse_sum[rt][h] = empty ? 0.0f : 1.0f / sum;
        lse[rt][h] = empty ? negative_infinity()
                           : (softmax_base(row_max[rt][h]) + fast_log2(sum)) * kLn2;
      }
  }
};

// A query head's sink logit in the log2 domain (kSinks), 0 otherwise.
template <class C>
__device__ __forceinline__ float sink_log2(const AttentionParams& p, int head) {
  if constexpr (C::kSinks) return p.sinks[head * p.sinks_stride] * kLog2e;
  return 0.0f;
}

// The transposed orientation of the key/value backward (rows are keys,
// columns queries; a thread's columns are 8·nt + 2t + {0, 1}): calls
// f(x, c, rt, nt, i) for each accumulator x = st[rt][nt][i] with c, the
// per-query value of its column (per_query[column]).
template <int kRowTiles, int kQueryTiles, class F>
__device__ __forceinline__ void for_each_with_column(float (&st)[kRowTiles][kQueryTiles][4],
                                                     const float* per_query, int lane, F f) {
  const int t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < kQueryTiles; ++nt) {
    const float c0 = per_query[nt * 8 + 2 * t], c1 = per_query[nt * 8 + 2 * t + 1];
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      f(st[rt][nt][0], c0, rt, nt, 0);
      f(st[rt][nt][1], c1, rt, nt, 1);
      f(st[rt][nt][2], c0, rt, nt, 2);
      f(st[rt][nt][3], c1, rt, nt, 3);
    }
  }
}

// Pᵀ = exp2(sᵀ − L2[query]) in place.
template <int kRowTiles, int kQueryTiles>
__device__ __forceinline__ void exp2_columns(float (&st)[kRowTiles][kQueryTiles][4],
                                             const float* l2, int lane) {
  for_each_with_column(st, l2, lane,
                       [](float& x, float l, int, int, int) { x = fast_exp2(x - l); });
}

// The factor by which the gradient of a logit reaches its score (beyond the
// scale): 1 − t² through the soft cap, t = tanh(s·scale / c), found from the
// probability P = exp2(c·t·log2(e) − bias − L2) so that no kernel keeps the
// logits: t = (log2 P + L2 + bias) / (c·log2(e)), clamped to [−1, 1] (P =
// 0, a masked or vanishing pair, gives 0, whose gradient is 0 anyway); `l2`
// is L2 + bias, the bias ALiBi's (0 without). 1 without a soft cap.
template <class C>
__device__ __forceinline__ float logit_slope(float prob, float l2, const AttentionParams& p) {
  if constexpr (C::kSoftcap) {
    // fminf/fmaxf, not a comparison: P = 0 at L2 = +inf (a query past its
    // sequence, or a row that sees no key) gives -inf + inf = NaN, which they
    // take to the bound.
    const float t = fmaxf(-1.0f, fminf(1.0f, (fast_log2(prob) + l2) * p.softcap_inverse_log2));
    return 1.0f - t * t;
  }
  return 1.0f;
}

// dSᵀ = Pᵀ ∘ (dPᵀ − Dterm[query]) (times the logit's slope), in place in
// dpt; l2: L2 per query; bias(rt, nt, i): ALiBi's bias of an element, which
// the soft cap's slope puts back (AlibiBias, softmax/mask.cuh).
template <class C, int kRowTiles, int kQueryTiles, class Bias>
__device__ __forceinline__ void subtract_columns_times(float (&dpt)[kRowTiles][kQueryTiles][4],
                                                       const float (&pt)[kRowTiles][kQueryTiles][4],
                                                       const float* l2, const float* dterm,
                                                       const AttentionParams& p, int lane,
                                                       const Bias& bias) {
  for_each_with_column(dpt, dterm, lane, [&](float& x, float d, int rt, int nt, int i) {
    const float prob = pt[rt][nt][i];
    const float l2_of = l2[nt * 8 + 2 * (lane & 3) + (i & 1)];
    x = prob * (x - d) *
        logit_slope<C>(prob, C::kSoftcap && C::kAlibi ? l2_of + bias(rt, nt, i) : l2_of, p);
  });
}

// The query backward's orientation (rows are queries; a thread holds rows g
// and g + 8 of each 16-row tile). P = exp2(s − L2[row]) in place.
template <int kRowTiles, int kKeyTiles>
__device__ __forceinline__ void exp2_rows(float (&s)[kRowTiles][kKeyTiles][4],
                                          const float (&l2)[kRowTiles][2]) {
  for_each_element(s, [&](float& x, int rt, int, int i) { x = fast_exp2(x - l2[rt][i >> 1]); });
}

// dS = P ∘ (dP − Dterm[row]) (times the logit's slope), in place in dp;
// bias as subtract_columns_times'.
template <class C, int kRowTiles, int kKeyTiles, class Bias>
__device__ __forceinline__ void subtract_rows_times(float (&dp)[kRowTiles][kKeyTiles][4],
                                                    const float (&pr)[kRowTiles][kKeyTiles][4],
                                                    const float (&l2)[kRowTiles][2],
                                                    const float (&dterm)[kRowTiles][2],
                                                    const AttentionParams& p, const Bias& bias) {
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float l2_of = l2[rt][i >> 1];
        dp[rt][nt][i] =
            pr[rt][nt][i] * (dp[rt][nt][i] - dterm[rt][i >> 1]) *
            logit_slope<C>(pr[rt][nt][i],
                           C::kSoftcap && C::kAlibi ? l2_of + bias(rt, nt, i) : l2_of, p);
      }
}

}  // namespace flashgen_device
