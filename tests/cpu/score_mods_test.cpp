// Masks and score modifiers on the CPU backend through the public API, each
// alone and combined, against the fp64 reference by the tolerance rule
// (support/attention_check.hpp): sliding windows, causal bottom-right and
// top-left, soft cap, ALiBi ([heads_q] and [batch, heads_q]), sinks (with
// their gradient), with GQA, Dv != Dqk, odd D, seq_q < seq_kv and > seq_kv,
// several blocks of rows each way, and rows that see no key.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attention_case.hpp"
#include "attention_check.hpp"
#include "score_options.hpp"
#include "scoped_env.hpp"

namespace flashgen::testing {
namespace {

constexpr bool kCausal = true, kFull = false;
constexpr DType f16 = DType::f16, bf16 = DType::bf16, f32 = DType::f32;
constexpr Layout bshd = Layout::bshd, bhsd = Layout::bhsd, padded = Layout::padded;

// One problem and the options that make it interesting.
struct ModCase {
  const char* name;
  Case shape;
  ScoreSpec spec;
};

void PrintTo(const ModCase& c, std::ostream* os) { *os << c.name; }

std::vector<ModCase> mod_cases() {
  using A = CausalAlignment;
  // spec: window_left, window_right, softcap, alibi rank (0 = none), sinks, alignment
  return {
      {"window_causal_sq_lt_skv", {1, 70, 300, 2, 1, 40, 40, kCausal, bf16, bshd}, {32, 0}},
      {"window_causal_top_left", {1, 300, 140, 2, 2, 64, 64, kCausal, f16, bhsd},
       {20, 5, 0, 0, false, A::top_left}},
      {"window_two_sided_sq_gt_skv", {2, 300, 90, 4, 2, 127, 127, kFull, f32, bshd}, {16, 8}},
      {"window_left_only_blocks", {1, 600, 600, 2, 1, 64, 48, kFull, bf16, padded}, {100, -1}},
      {"window_right_only", {1, 200, 530, 3, 1, 72, 72, kFull, f16, bshd}, {-1, 40}},
      {"window_diagonal_only", {1, 90, 60, 2, 2, 40, 40, kFull, f32, bhsd}, {0, 0}},
      {"top_left_sq_lt_skv", {1, 70, 300, 2, 1, 127, 127, kCausal, bf16, bshd},
       {-1, -1, 0, 0, false, A::top_left}},
      {"top_left_sq_gt_skv", {2, 300, 70, 4, 4, 40, 24, kCausal, f32, padded},
       {-1, -1, 0, 0, false, A::top_left}},
      {"softcap", {1, 130, 200, 4, 2, 64, 64, kFull, bf16, bshd}, {-1, -1, 2.0}},
      {"softcap_causal", {1, 260, 260, 2, 1, 127, 127, kCausal, f32, bhsd}, {-1, -1, 1.5}},
      {"alibi_heads", {1, 300, 300, 4, 2, 40, 40, kCausal, bf16, bhsd}, {-1, -1, 0, 1}},
      {"alibi_batch_heads", {2, 90, 140, 3, 1, 64, 80, kFull, f32, bshd}, {-1, -1, 0, 2}},
      {"softcap_alibi", {1, 200, 130, 2, 2, 127, 127, kFull, f16, padded}, {-1, -1, 3.0, 1}},
      {"sinks", {1, 130, 200, 4, 2, 64, 64, kFull, bf16, bshd}, {-1, -1, 0, 0, true}},
      {"sinks_causal_empty_rows", {1, 300, 70, 2, 1, 40, 40, kCausal, f32, bhsd},
       {-1, -1, 0, 0, true}},
      {"sinks_window_empty_rows", {2, 200, 60, 2, 2, 127, 64, kFull, f32, bshd},
       {10, 0, 0, 0, true}},
      {"everything", {2, 280, 300, 4, 2, 40, 72, kCausal, bf16, padded}, {50, 0, 2.5, 2, true}},
      {"everything_top_left", {1, 300, 280, 2, 1, 127, 127, kCausal, f32, bhsd},
       {64, 16, 4.0, 1, true, A::top_left}},
  };
}

class CpuScoreMods : public ::testing::TestWithParam<ModCase> {};

TEST_P(CpuScoreMods, ForwardAndBackwardMatchReference) {
  const ModCase& c = GetParam();
  ScoreOptions mods(c.spec, c.shape);
  EXPECT_TRUE(check_forward(c.shape, mods.options()));
  EXPECT_TRUE(check_backward(c.shape, mods.options()));
}

// The backward's query pass (dQ computed apart) with every modifier.
TEST_P(CpuScoreMods, BackwardWithAQueryPassMatchesReference) {
  ScopedEnv query_pass("FLASHGEN_CPU_BACKWARD", "query_pass");
  const ModCase& c = GetParam();
  ScoreOptions mods(c.spec, c.shape);
  EXPECT_TRUE(check_backward(c.shape, mods.options()));
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuScoreMods, ::testing::ValuesIn(mod_cases()),
                         [](const ::testing::TestParamInfo<ModCase>& info) {
                           return std::string(info.param.name);
                         });

// A row that sees no key: O = 0 and LSE = -inf without sinks, LSE = the
// sink's logit with them.
TEST(CpuScoreMods, RowsWithoutKeysGiveZeroOutput) {
  const std::int64_t sq = 6, skv = 3, d = 8;  // window (0, 0): rows 0 ... 2 see no key
  std::vector<float> q(sq * d, 0.5f), k(skv * d, 0.25f), v(skv * d, 1.0f), o(sq * d, 7.0f),
      lse(sq, 7.0f);
  for (const bool with_sink : {false, true}) {
    std::vector<float> sink = {0.75f};
    ForwardArgs args;
    args.q = TensorView::bshd(q.data(), DType::f32, 1, sq, 1, d);
    args.k = TensorView::bshd(k.data(), DType::f32, 1, skv, 1, d);
    args.v = TensorView::bshd(v.data(), DType::f32, 1, skv, 1, d);
    args.o = TensorView::bshd(o.data(), DType::f32, 1, sq, 1, d);
    args.lse = RowStatsView::contiguous(lse.data(), 1, 1, sq);
    Options options;
    options.backend = Backend::cpu;
    options.window_left = options.window_right = 0;
    if (with_sink) options.sinks = HeadVectorView::heads(sink.data(), 1);
    forward(args, options);
    for (std::int64_t i = 0; i < sq; ++i) {
      const bool empty = i < sq - skv;
      if (empty) {
        EXPECT_EQ(lse[i], with_sink ? 0.75f : -std::numeric_limits<float>::infinity()) << i;
      } else {
        EXPECT_TRUE(std::isfinite(lse[i])) << i;
      }
      for (std::int64_t j = 0; j < d; ++j) {
        EXPECT_EQ(o[i * d + j], empty ? 0.0f : (with_sink ? o[i * d + j] : 1.0f)) << i;
      }
    }
  }
}

// Masks and modifiers on an empty problem (seq_kv = 0): with sinks every
// row's LSE is the sink and the sinks' gradient is zero.
TEST(CpuScoreMods, EmptyKeysWithSinks) {
  const Case c{1, 7, 0, 2, 1, 40, 40, kFull, f32, bshd};
  ScoreOptions mods({4, 0, 2.0, 1, true}, c);
  EXPECT_TRUE(check_forward(c, mods.options()));
  EXPECT_TRUE(check_backward(c, mods.options()));
}

}  // namespace
}  // namespace flashgen::testing
