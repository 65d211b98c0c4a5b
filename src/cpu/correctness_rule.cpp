#include "cpu/correctness_rule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace flashgen::cpu {

double max_abs_error(const std::vector<double>& x, const std::vector<double>& ref) {
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] == ref[i]) continue;
    const double difference = std::fabs(x[i] - ref[i]);
    if (std::isnan(difference)) return std::numeric_limits<double>::quiet_NaN();
    worst = std::max(worst, difference);
  }
  return worst;
}

double slack_scale(const std::vector<double>& ref) {
  double scale = 1.0;
  for (double r : ref)
    if (std::isfinite(r)) scale = std::max(scale, std::fabs(r));
  return scale;
}

double absolute_slack(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4e-6;     // ~34 fp32 ulps: summation-order noise
    case DType::f16: return 0x1p-11;  // half an f16 ulp at 1
    case DType::bf16: return 0x1p-8;  // half a bf16 ulp at 1
    case DType::e4m3: break;          // a KV cache's storage, never an output's dtype
  }
  return 0.0;
}

RuleCheck apply_correctness_rule(const std::vector<double>& out, const std::vector<double>& naive,
                                 const std::vector<double>& ref, double slack) {
  RuleCheck c;
  c.error = max_abs_error(out, ref);
  c.naive_error = max_abs_error(naive, ref);
  c.bound = kNaiveErrorFactor * c.naive_error + slack * slack_scale(ref);
  c.pass = c.error <= c.bound;  // false for NaN
  return c;
}

}  // namespace flashgen::cpu
