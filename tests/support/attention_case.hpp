// One attention problem as tests see it, with a readable name, and the
// standard lists every backend's correctness suite runs.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/problem.hpp"
#include "flashgen/flashgen.hpp"
#include "test_tensor.hpp"

namespace flashgen::testing {

struct Case {
  std::int64_t batch = 1;
  std::int64_t seq_q = 64, seq_kv = 64;
  std::int64_t heads_q = 1, heads_kv = 1;
  std::int64_t dim_qk = 64, dim_v = 64;
  bool causal = false;
  DType dtype = DType::bf16;
  Layout layout = Layout::bshd;  // of every [batch, seq, heads, dim] tensor
  // Where every tensor's storage lies (ends_at_unmapped_page: an access past
  // a tensor's last element faults).
  Placement placement = Placement::plain;
  // A sliding window (Options::window_left / window_right; -1 = unbounded),
  // the causal mask's alignment, a soft cap and sinks (sink_value(), in the
  // backend's memory). Set here they replace the options' own
  // (check_forward, check_backward); left unset they leave them.
  std::int64_t window_left = -1, window_right = -1;
  CausalAlignment alignment = CausalAlignment::bottom_right;
  double softcap = 0.0;
  bool sinks = false;
  int alibi = 0;  // ALiBi slopes (alibi_slope_value()): 0 none, 1 [heads_q], 2 [batch, heads_q]
  // A user mask: test_mask(user_mask) over MaskArrays (user_masks.hpp), in
  // the backend's memory; 0 none.
  int user_mask = 0;

  bool has_window() const { return window_left >= 0 || window_right >= 0; }

  // "b2_sq7_skv64_hq4_hkv1_d40_causal_bf16_bhsd" ("d192_dv128" when the value
  // dimension differs, "_page_end" for that placement, "_window32_0" for a
  // window (m for -1), "_top_left", "_softcap2p5", "_sinks", "_alibi1", "_mask2"): letters,
  // digits and '_' only, so it is a valid gtest parameter name.
  std::string to_string() const;
  // The normalized problem; scale unset means 1 / sqrt(dim_qk). The masks and
  // score modifiers come from the options (their views in host memory).
  Problem problem(const Options& options = {}) const;
};

void PrintTo(const Case& c, std::ostream* os);

// The sink logit of query head h of heads_q that tests use: spread over [-1, 2).
float sink_value(std::int64_t h, std::int64_t heads_q);
// The ALiBi slope of (batch b, head h) that tests use: 2^-(h + 1), ALiBi's
// geometric sequence, times 1 + b / 4 (b = 0 for one slope per head).
float alibi_slope_value(std::int64_t b, std::int64_t h);

// gtest parameter names: INSTANTIATE_TEST_SUITE_P(..., ValuesIn(...), CaseName()).
struct CaseName {
  std::string operator()(const ::testing::TestParamInfo<Case>& info) const {
    return info.param.to_string();
  }
};

// A thin cross product: every head dimension of the contract (1 ... 512, and
// Dv != Dqk), every sequence length in {1, 7, 64, 777} on both sides (equal
// and not), causal with seq_q < seq_kv and seq_q > seq_kv (rows that see no
// key), GQA ratios 1, 4, 7, batch > 1, the three layouts and three dtypes,
// each feature in several combinations, with few large shapes.
std::vector<Case> standard_forward_cases();
// The same coverage with fewer large shapes (the backward reference costs
// about three forwards).
std::vector<Case> standard_backward_cases();

// Problems with no (query, key) pair: batch 0, no query heads (with and
// without key/value heads, whose gradients are then zeros), empty
// sequences. Outputs are empty or zeros (LSE -inf), as torch's SDPA gives.
std::vector<Case> empty_cases();

// Problems whose tensors each end where the mapped memory ends
// (Placement::ends_at_unmapped_page), so a read or write past a tensor
// faults: every load path of the GPU (rows aligned to 16 bytes for TMA, 8
// and 4 bytes for cp.async, 2 bytes staged and shifted), heads-major
// storage, the wide-head kernels and fp32.
std::vector<Case> page_end_cases();

}  // namespace flashgen::testing
