#include "common/problem.hpp"

#include <algorithm>

namespace flashgen {

Strides4 strides_of(const TensorView& t) {
  return Strides4{t.stride[0], t.stride[1], t.stride[2], t.stride[3]};
}

Strides3 strides_of(const RowStatsView& t) {
  return Strides3{t.stride[0], t.stride[1], t.stride[2]};
}

double unmasked_pairs(const Problem& p) {
  const double sq = static_cast<double>(p.seq_q);
  const double skv = static_cast<double>(p.seq_kv);
  if (!p.causal) return sq * skv;
  // Bottom-right causal: row i sees max(0, i + (Skv - Sq) + 1) keys (never
  // more than Skv). The last n = min(Sq, Skv) rows see extra + 1 ... extra + n
  // keys with extra = max(0, Skv - Sq); the earlier rows see none.
  const double n = static_cast<double>(std::min(p.seq_q, p.seq_kv));
  const double extra = static_cast<double>(std::max<std::int64_t>(0, p.seq_kv - p.seq_q));
  return n * extra + n * (n + 1.0) / 2.0;
}

double forward_flops(const Problem& p) {
  // Two GEMMs per unmasked pair: S = Q·Kᵀ (2·Dqk) and O += P·V (2·Dv).
  return 2.0 * static_cast<double>(p.batch) * static_cast<double>(p.heads_q) *
         unmasked_pairs(p) * static_cast<double>(p.dim_qk + p.dim_v);
}

double backward_flops(const Problem& p) {
  // FlashAttention convention: the backward's five GEMMs count as 2.5 forwards.
  constexpr double kBackwardOverForward = 2.5;
  return kBackwardOverForward * forward_flops(p);
}

}  // namespace flashgen
