#include "score_options.hpp"

#include <cmath>

namespace flashgen::testing {

ScoreOptions::ScoreOptions(const ScoreSpec& spec, const Case& c, Backend backend) {
  options_.backend = backend;
  options_.causal_alignment = spec.alignment;
  options_.window_left = spec.window_left;
  options_.window_right = spec.window_right;
  options_.softcap = spec.softcap;
  if (spec.alibi_rank > 0) {
    const std::int64_t batches = spec.alibi_rank == 2 ? c.batch : 1;
    for (std::int64_t b = 0; b < batches; ++b)
      for (std::int64_t h = 0; h < c.heads_q; ++h)
        slopes_.push_back(alibi_slope_value(b, h));
    options_.alibi_slopes = spec.alibi_rank == 2
                                ? HeadVectorView::batch_heads(slopes_.data(), c.batch, c.heads_q)
                                : HeadVectorView::heads(slopes_.data(), c.heads_q);
  }
  if (spec.sinks) {
    for (std::int64_t h = 0; h < c.heads_q; ++h)
      sinks_.push_back(sink_value(h, c.heads_q));
    options_.sinks = HeadVectorView::heads(sinks_.data(), c.heads_q);
  }
}

}  // namespace flashgen::testing
