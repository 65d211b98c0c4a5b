// The CPU backend through the public API on the standard cases: every output
// against the fp64 reference by the tolerance rule (support/attention_check.hpp).
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "attention_case.hpp"
#include "attention_check.hpp"
#include "scoped_env.hpp"

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

// Shapes drawn at random (fixed seed) around the block edges the standard
// list does not hit: odd lengths, dims and head counts, all layouts/dtypes.
std::vector<Case> random_cases(int count) {
  std::mt19937 rng(20261203);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const DType dtypes[] = {DType::f16, DType::bf16, DType::f32};
  const Layout layouts[] = {Layout::bshd, Layout::bhsd, Layout::padded};
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) {
    Case c;
    c.batch = pick(1, 2);
    c.heads_kv = pick(1, 3);
    c.heads_q = c.heads_kv * pick(1, 3);
    c.seq_q = pick(1, 200);
    c.seq_kv = pick(1, 200);
    c.dim_qk = pick(1, 300);
    c.dim_v = pick(0, 1) ? c.dim_qk : pick(1, 300);
    c.causal = pick(0, 1) == 1;
    c.dtype = dtypes[pick(0, 2)];
    c.layout = layouts[pick(0, 2)];
    cases.push_back(c);
  }
  return cases;
}

class CpuRandomShapes : public ::testing::TestWithParam<Case> {};

TEST_P(CpuRandomShapes, ForwardAndBackwardMatchReference) {
  EXPECT_TRUE(check_forward(GetParam(), cpu_options()));
  EXPECT_TRUE(check_backward(GetParam(), cpu_options()));
}

INSTANTIATE_TEST_SUITE_P(Random, CpuRandomShapes, ::testing::ValuesIn(random_cases(16)),
                         CaseName());

// A softmax scale other than 1/sqrt(dim_qk) reaches the backend (the
// reference uses the same options).
TEST(CpuAttention, HonoursAnExplicitScale) {
  Options options = cpu_options();
  options.scale = 0.3;
  const Case c{1, 64, 100, 4, 2, 40, 24, true, DType::f16, Layout::padded};
  EXPECT_TRUE(check_forward(c, options));
  EXPECT_TRUE(check_backward(c, options));
}

// The backward's other way of computing dQ (a query pass of its own, taken
// where dQ's per-key-block shares would not fit the memory budget), forced:
// several query and key blocks, GQA, causal with empty rows, odd dims.
TEST(CpuAttention, BackwardWithAQueryPassMatchesReference) {
  ScopedEnv query_pass("FLASHGEN_CPU_BACKWARD", "query_pass");
  for (const Case& c : {Case{1, 600, 530, 4, 2, 72, 40, true, DType::bf16, Layout::bshd},
                        Case{2, 300, 300, 2, 1, 127, 127, false, DType::f32, Layout::bhsd},
                        Case{1, 520, 260, 2, 2, 64, 64, true, DType::f16, Layout::padded}}) {
    EXPECT_TRUE(check_backward(c, cpu_options())) << c.to_string();
  }
}

INSTANTIATE_TEST_SUITE_P(Standard, CpuForward, ::testing::ValuesIn(standard_forward_cases()),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Standard, CpuBackward, ::testing::ValuesIn(standard_backward_cases()),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Empty, CpuForward, ::testing::ValuesIn(empty_cases()), CaseName());
INSTANTIATE_TEST_SUITE_P(Empty, CpuBackward, ::testing::ValuesIn(empty_cases()), CaseName());
// Nothing past a tensor is read or written: every tensor ends at a PROT_NONE page.
INSTANTIATE_TEST_SUITE_P(PageEnd, CpuForward, ::testing::ValuesIn(page_end_cases()), CaseName());
INSTANTIATE_TEST_SUITE_P(PageEnd, CpuBackward, ::testing::ValuesIn(page_end_cases()), CaseName());

}  // namespace
}  // namespace flashgen::testing
