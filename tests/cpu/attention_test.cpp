// The CPU backend through the public API on the standard cases: every output
// against the fp64 reference by the tolerance rule (support/attention_check.hpp).
#include <gtest/gtest.h>

#include "attention_case.hpp"
#include "attention_check.hpp"

namespace flashgen::testing {
namespace {

Options cpu_options() {
  Options options;
  options.backend = Backend::cpu;
  return options;
}

class CpuForward : public ::testing::TestWithParam<Case> {};
class CpuBackward : public ::testing::TestWithParam<Case> {};

TEST_P(CpuForward, MatchesReference) { EXPECT_TRUE(check_forward(GetParam(), cpu_options())); }

TEST_P(CpuBackward, MatchesReference) { EXPECT_TRUE(check_backward(GetParam(), cpu_options())); }

INSTANTIATE_TEST_SUITE_P(Standard, CpuForward, ::testing::ValuesIn(standard_forward_cases()),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Standard, CpuBackward, ::testing::ValuesIn(standard_backward_cases()),
                         CaseName());

}  // namespace
}  // namespace flashgen::testing
