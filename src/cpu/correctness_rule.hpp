// The correctness rule every judge of results uses (tests, `flashgen run` and
// `bench`, the tuner), against the fp64 reference of cpu/reference.hpp:
//     max |X - ref| <= 2 · max |X_naive - ref| + slack · max(1, max |ref|)
// where X_naive is the naive computation in the storage dtype (FlashAttention's
// rule). NaN never passes.
#pragma once

#include <vector>

#include "flashgen/flashgen.hpp"

namespace flashgen::cpu {

inline constexpr double kNaiveErrorFactor = 2.0;

// max |x - ref|; equal values (infinities included) differ by 0; NaN when x
// holds a NaN where ref does not equal it.
double max_abs_error(const std::vector<double>& x, const std::vector<double>& ref);

// max(1, max |ref| over its finite values): what the slack is relative to.
double slack_scale(const std::vector<double>& ref);

// The slack, relative to slack_scale, for outputs stored in `dtype`: half an
// ulp at 1 for f16 and bf16 (the output's own final rounding, which the naive
// computation can land on luckily), 4e-6 for f32 (summation-order noise).
double absolute_slack(DType dtype);

struct RuleCheck {
  double error = 0;        // max |X - ref| (NaN when X holds a NaN)
  double naive_error = 0;  // max |X_naive - ref|
  double bound = 0;        // 2 · naive_error + slack · slack_scale(ref)
  bool pass = false;
};
RuleCheck apply_correctness_rule(const std::vector<double>& out, const std::vector<double>& naive,
                                 const std::vector<double>& ref, double slack);

}  // namespace flashgen::cpu
