// Masks and score modifiers for a test case: a plain description (ScoreSpec)
// and the Options it makes, owning the ALiBi slopes and sinks they point to.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "attention_case.hpp"
#include "device_storage.hpp"
#include "flashgen/flashgen.hpp"
#include "user_masks.hpp"

namespace flashgen::testing {

struct ScoreSpec {
  std::int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  int alibi_rank = 0;  // 0: none; 1: [heads_q]; 2: [batch, heads_q]
  bool sinks = false;
  CausalAlignment alignment = CausalAlignment::bottom_right;
  int user_mask = 0;  // test_mask(user_mask) over MaskArrays (user_masks.hpp); 0: none
};

class ScoreOptions {
 public:
  // Slopes alibi_slope_value(b, h), sinks sink_value(h, heads_q)
  // (attention_case.hpp), the mask's arrays; options() holds them in the backend's memory
  // (memory_for(backend)), host_options() on the host, as the reference
  // reads them.
  ScoreOptions(const ScoreSpec& spec, const Case& c, Backend backend = Backend::cpu);
  ScoreOptions(const ScoreOptions&) = delete;  // the options point into this object
  const Options& options() const { return options_; }
  const Options& host_options() const { return host_options_; }

 private:
  std::vector<float> slopes_, sinks_;
  MaskArrays mask_arrays_;
  // CUDA copies, where the backend is
  std::unique_ptr<Storage> device_slopes_, device_sinks_;
  std::vector<std::unique_ptr<Storage>> device_mask_arrays_;
  Options options_, host_options_;
};

}  // namespace flashgen::testing
