// User masks (options.mask_mod) on the CPU backend: the compiled program
// against the node-by-node evaluator pair by pair, then forward and backward
// through the public API against the fp64 reference by the tolerance rule
// (support/attention_check.hpp): a document mask over packed sequences, a
// prefix-LM mask, float arrays, with causal, a window, sinks, GQA, odd D,
// rows the mask leaves no key, and the errors an evaluation can meet.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attention_case.hpp"
#include "attention_check.hpp"
#include "common/mask_expression.hpp"
#include "cpu/mask_program.hpp"
#include "scoped_env.hpp"
#include "user_masks.hpp"

namespace flashgen::testing {
namespace {

constexpr bool kCausal = true, kFull = false;

// Every pair of a grid, along the keys and along the queries, in runs that
// start anywhere: the program and the evaluator agree on each.
TEST(CpuMaskProgram, AgreesWithTheNodeEvaluator) {
  const MaskArrays arrays(400);
  for (int n = 1; n <= kTestMasks; ++n) {
    const char* text = test_mask(n);
    SCOPED_TRACE(text);
    Problem p;
    p.batch = 2, p.heads_q = 8, p.seq_q = 300, p.seq_kv = 400;
    copy_score_options(arrays.options(text), p);
    const cpu::MaskProgram program(p);
    std::vector<std::uint8_t> attend(400);
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t h = 0; h < 8; h += 3)
        for (std::int64_t q = 0; q < 300; q += 7) {
          const int n = static_cast<int>(400 - q / 2);
          const int count = program.evaluate(b, h, q, 0, q / 2, 1, n, attend.data());
          int expected = 0;
          for (int l = 0; l < n; ++l) {
            const bool want = mask::attends(*p.mask, {b, h, q, q / 2 + l});
            ASSERT_EQ(attend[l] != 0, want) << "b=" << b << " h=" << h << " q=" << q << " kv=" << q / 2 + l;
            expected += want;
          }
          EXPECT_EQ(count, expected);
          const std::int64_t kv = q + 50;  // along the queries: key fixed
          const int m = static_cast<int>(300 - q / 3);
          program.evaluate(b, h, q / 3, 1, kv, 0, m, attend.data());
          for (int l = 0; l < m; ++l)
            ASSERT_EQ(attend[l] != 0, mask::attends(*p.mask, {b, h, q / 3 + l, kv}))
                << "b=" << b << " h=" << h << " q=" << q / 3 + l << " kv=" << kv;
        }
  }
}

// A fault in any lane is reported with the node evaluator's words; lanes
// whose fault C's short circuits skip are not faults.
TEST(CpuMaskProgram, FaultsAreReportedOnlyWhereCEvaluates) {
  const MaskArrays arrays(100);
  Problem p;
  p.batch = 1, p.heads_q = 1, p.seq_q = 100, p.seq_kv = 300;
  copy_score_options(arrays.options("kv_idx < 100 && doc[kv_idx] == doc[q_idx]"), p);
  std::vector<std::uint8_t> attend(300);
  EXPECT_NO_THROW(cpu::MaskProgram(p).evaluate(0, 0, 5, 0, 0, 1, 300, attend.data()));
  copy_score_options(arrays.options("kv_idx >= 100 ? 0 : bias[0] < doc[kv_idx]"), p);
  EXPECT_NO_THROW(cpu::MaskProgram(p).evaluate(0, 0, 5, 0, 0, 1, 300, attend.data()));
  copy_score_options(arrays.options("doc[kv_idx] == doc[q_idx]"), p);
  try {
    cpu::MaskProgram(p).evaluate(0, 0, 5, 0, 60, 1, 240, attend.data());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("index 100 of \"doc\" is outside [0, 100) in doc[kv_idx] "
                                         "at b = 0, h = 0, q_idx = 5, kv_idx = 100"),
              std::string::npos)
        << e.what();
  }
  copy_score_options(arrays.options("q_idx % (kv_idx - 7) < 3"), p);
  EXPECT_THROW(cpu::MaskProgram(p).evaluate(0, 0, 5, 0, 0, 1, 16, attend.data()), Error);
}

struct MaskCase {
  const char* name;
  Case shape;
  const char* expression;
  bool sinks = false;
  std::int64_t window_left = -1;
};

void PrintTo(const MaskCase& c, std::ostream* os) { *os << c.name; }

std::vector<MaskCase> mask_cases() {
  constexpr DType f16 = DType::f16, bf16 = DType::bf16, f32 = DType::f32;
  constexpr Layout bshd = Layout::bshd, bhsd = Layout::bhsd, padded = Layout::padded;
  return {
      {"document_packed", {1, 560, 560, 4, 2, 64, 64, kFull, bf16, bshd}, test_mask(1)},
      {"document_causal_gqa_d40", {2, 300, 300, 6, 2, 40, 40, kCausal, f32, bhsd}, test_mask(1)},
      {"document_d127", {1, 280, 280, 2, 1, 127, 127, kCausal, f16, padded}, test_mask(1)},
      {"prefix_lm", {2, 300, 300, 4, 1, 64, 48, kFull, bf16, bshd}, test_mask(2)},
      {"prefix_lm_causal_sq_lt_skv_d127", {2, 130, 350, 2, 2, 127, 127, kCausal, f32, bhsd},
       test_mask(2)},
      {"float_array_and_select", {2, 260, 300, 8, 4, 40, 40, kFull, f32, bshd}, test_mask(3)},
      {"shifted_index", {1, 300, 300, 2, 1, 72, 72, kFull, bf16, bhsd}, test_mask(4)},
      {"arithmetic", {2, 200, 270, 3, 1, 40, 40, kFull, f32, padded}, test_mask(5)},
      {"rows_without_keys", {1, 300, 300, 2, 2, 64, 64, kFull, f32, bshd}, test_mask(6)},
      {"rows_without_keys_sinks", {1, 300, 300, 2, 2, 64, 64, kFull, f32, bshd}, test_mask(6),
       true},
      {"document_window_sinks", {1, 400, 400, 4, 2, 40, 40, kCausal, bf16, bshd}, test_mask(1),
       true, 100},
  };
}

class CpuMaskMod : public ::testing::TestWithParam<MaskCase> {
 protected:
  Options options_for(const MaskCase& c) {
    Options o = arrays.options(c.expression);
    o.window_left = c.window_left;
    if (c.sinks) {
      sinks.resize(c.shape.heads_q);
      for (std::int64_t h = 0; h < c.shape.heads_q; ++h) sinks[h] = 0.5f * static_cast<float>(h) - 1.0f;
      o.sinks = HeadVectorView::heads(sinks.data(), c.shape.heads_q);
    }
    return o;
  }
  MaskArrays arrays{600};
  std::vector<float> sinks;
};

TEST_P(CpuMaskMod, ForwardAndBackwardMatchReference) {
  const MaskCase& c = GetParam();
  const Options options = options_for(c);
  EXPECT_TRUE(check_forward(c.shape, options));
  EXPECT_TRUE(check_backward(c.shape, options));
}

// The backward's query pass (dQ computed apart) with the mask.
TEST_P(CpuMaskMod, BackwardWithAQueryPassMatchesReference) {
  ScopedEnv query_pass("FLASHGEN_CPU_BACKWARD", "query_pass");
  const MaskCase& c = GetParam();
  EXPECT_TRUE(check_backward(c.shape, options_for(c)));
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuMaskMod, ::testing::ValuesIn(mask_cases()),
                         [](const ::testing::TestParamInfo<MaskCase>& info) {
                           return std::string(info.param.name);
                         });

// A mask that reads past its array fails the call with the pair named.
TEST(CpuMaskModErrors, AnIndexOutOfRangeFailsTheCall) {
  const MaskArrays arrays(100);  // doc has 100 entries; seq_kv is 150
  const Case c{1, 120, 150, 1, 1, 40, 40, kFull, DType::f32, Layout::bshd};
  const ::testing::AssertionResult result = check_forward(c, arrays.options("doc[kv_idx] == doc[q_idx]"));
  EXPECT_FALSE(result);
  EXPECT_NE(std::string(result.message()).find("index 100 of \"doc\" is outside [0, 100)"),
            std::string::npos)
      << result.message();
}

}  // namespace
}  // namespace flashgen::testing
