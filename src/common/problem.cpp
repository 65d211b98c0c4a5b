#include "common/problem.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace flashgen {

Strides4 strides_of(const TensorView& t) {
  return Strides4{t.stride[0], t.stride[1], t.stride[2], t.stride[3]};
}

Strides3 strides_of(const RowStatsView& t) {
  return Strides3{t.stride[0], t.stride[1], t.stride[2]};
}

double Problem::alibi_slope(std::int64_t batch, std::int64_t head) const {
  if (!alibi_slopes.given()) return 0.0;
  const HeadVectorView& a = alibi_slopes;
  return a.rank == 1 ? a.data[head * a.stride[0]]
                     : a.data[batch * a.stride[0] + head * a.stride[1]];
}

double Problem::sink(std::int64_t head) const { return sinks.data[head * sinks.stride[0]]; }

void copy_score_options(const Options& options, Problem& p) {
  p.causal_alignment = options.causal_alignment;
  p.window_left = options.window_left;
  p.window_right = options.window_right;
  p.softcap = options.softcap;
  p.alibi_slopes = options.alibi_slopes;
  p.sinks = options.sinks;
  p.grad_sinks = options.grad_sinks;
  p.mask = bind_mask(options);
}

std::shared_ptr<const mask::BoundMask> bind_mask(const Options& options) {
  if (options.mask_mod.empty()) return nullptr;
  std::vector<mask::ArrayName> names;
  std::vector<mask::ArrayData> arrays;
  for (const MaskTensorView& t : options.mask_tensors) {
    const bool floating = t.element == MaskElement::float32;
    names.push_back({t.name, floating});
    arrays.push_back({t.data, floating, t.size, t.stride});
  }
  return std::make_shared<const mask::BoundMask>(
      mask::BoundMask{mask::Expression::parse(options.mask_mod, std::move(names)), std::move(arrays)});
}

HeadVectorView slopes_of_row(const HeadVectorView& slopes, std::int64_t b) {
  if (!slopes.given() || slopes.rank == 1) return slopes;
  HeadVectorView row = slopes;
  row.data = slopes.data + b * slopes.stride[0];
  row.rank = 1;
  row.shape[0] = slopes.shape[1], row.shape[1] = 0;
  row.stride[0] = slopes.stride[1], row.stride[1] = 0;
  return row;
}

RowRange visible_keys(const Problem& p, std::int64_t row) {
  const std::int64_t diagonal = row + p.diagonal_offset();
  std::int64_t begin = 0, end = p.seq_kv;
  if (p.window_left >= 0) begin = std::max(begin, diagonal - p.window_left);
  if (p.window_right >= 0) end = std::min(end, diagonal + p.window_right + 1);
  if (p.causal) end = std::min(end, row + p.causal_offset() + 1);
  begin = std::min(begin, p.seq_kv);
  return {begin, std::max(end, begin)};
}

RowRange seeing_queries(const Problem& p, std::int64_t key) {
  const std::int64_t diagonal = key - p.diagonal_offset();  // the query whose diagonal is `key`
  std::int64_t begin = 0, end = p.seq_q;
  if (p.causal) begin = std::max(begin, key - p.causal_offset());
  if (p.window_right >= 0) begin = std::max(begin, diagonal - p.window_right);
  if (p.window_left >= 0) end = std::min(end, diagonal + p.window_left + 1);
  begin = std::min(begin, p.seq_q);
  return {begin, std::max(end, begin)};
}

double unmasked_pairs(const Problem& p) {
  const double sq = static_cast<double>(p.seq_q);
  const double skv = static_cast<double>(p.seq_kv);
  if (p.has_window() || (p.causal && p.causal_alignment == CausalAlignment::top_left)) {
    double pairs = 0.0;
    for (std::int64_t i = 0; i < p.seq_q; ++i) pairs += static_cast<double>(visible_keys(p, i).size());
    return pairs;
  }
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
