#include "cpu/score_mods.hpp"

#include <cmath>
#include <numbers>

namespace flashgen::cpu {

ScoreModifier::ScoreModifier(const Problem& p)
    : p_(p),
      scale_(static_cast<float>(p.scale)),
      softcap_(static_cast<float>(p.softcap)),
      scale_log2_(0.0f),
      alibi_(p.alibi_slopes.given()),
      mask_(p.has_mask()) {
  scale_log2_ = active() ? std::numbers::log2e_v<float>
                         : static_cast<float>(p.scale * std::numbers::log2e);
}

void ScoreModifier::apply(float* scores, int n, float slope, std::int64_t first,
                          std::int64_t step, float* derivative) const {
  for (int c = 0; c < n; ++c) {
    float x = scores[c] * scale_;
    if (softcap_ > 0.0f) {
      const float t = std::tanh(x / softcap_);
      x = softcap_ * t;
      if (derivative != nullptr) derivative[c] = 1.0f - t * t;
    }
    if (alibi_) x -= slope * static_cast<float>(std::llabs(first + step * c));
    scores[c] = x;
  }
}

void ScoreModifier::query_row(float* scores, int n, std::int64_t batch, std::int64_t head,
                              std::int64_t query, std::int64_t key0, float* derivative) const {
  const float slope = static_cast<float>(p_.alibi_slope(batch, head));
  // |query + Skv - Sq - (key0 + c)|
  apply(scores, n, slope, query + p_.diagonal_offset() - key0, -1, derivative);
}

void ScoreModifier::key_row(float* scores, int n, std::int64_t batch, std::int64_t head,
                            std::int64_t key, std::int64_t query0, float* derivative) const {
  const float slope = static_cast<float>(p_.alibi_slope(batch, head));
  // |query0 + c + Skv - Sq - key|
  apply(scores, n, slope, query0 + p_.diagonal_offset() - key, 1, derivative);
}

void ScoreModifier::chain(float* ds, const float* derivative, int n) {
  for (int c = 0; c < n; ++c) ds[c] *= derivative[c];
}

}  // namespace flashgen::cpu
