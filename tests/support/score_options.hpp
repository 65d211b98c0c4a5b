// Masks and score modifiers for a test case: a plain description (ScoreSpec)
// and the Options it makes, owning the ALiBi slopes and sinks they point to.
#pragma once

#include <cstdint>
#include <vector>

#include "attention_case.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::testing {

struct ScoreSpec {
  std::int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  int alibi_rank = 0;  // 0: none; 1: [heads_q]; 2: [batch, heads_q]
  bool sinks = false;
  CausalAlignment alignment = CausalAlignment::bottom_right;
};

class ScoreOptions {
 public:
  // Slopes 2^-(h + 1) (times 1 + b / 4 for [batch, heads_q]), as ALiBi's
  // geometric sequence; sinks spread over [-1, 2).
  ScoreOptions(const ScoreSpec& spec, const Case& c, Backend backend = Backend::cpu);
  ScoreOptions(const ScoreOptions&) = delete;  // the options point into this object
  const Options& options() const { return options_; }

 private:
  std::vector<float> slopes_, sinks_;
  Options options_;
};

}  // namespace flashgen::testing
