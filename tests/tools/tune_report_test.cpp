// `flashgen tune`'s report: one line per kind, and with --list-timed every
// timed candidate under it, fastest first.
#include "tune_report.hpp"

#include <gtest/gtest.h>

#include <string>

namespace flashgen::cli {
namespace {

KindResult two_candidates() {
  KindResult r;
  r.kind = KernelKind::backward_key_value;
  r.default_tuning = TuningParams{64, 32, 0, 4, 0};
  r.best = TuningParams{128, 64, 0, 8, 0};
  r.default_ms = 20;
  r.best_ms = 10;
  r.flops = 1e12;
  r.outcomes = {{r.default_tuning, true, 20.0, false, ""},
                {r.best, false, 10.0, false, ""},
                {TuningParams{32, 16, 0, 2, 0}, false, 40.0, true, ""},
                {TuningParams{64, 16, 0, 4, 0}, false, -1, false, "dQ differs"}};
  return r;
}

TEST(TuneReport, ListsTimedCandidatesFastestFirstOnRequest) {
  testing::internal::CaptureStdout();
  print_configuration("bf16 D=64 non-causal", {two_candidates()}, true);
  const std::string out = testing::internal::GetCapturedStdout();
  const std::size_t best = out.find("   10.000 ms"), default_line = out.find("   20.000 ms"),
                    cut = out.find("   40.000 ms");
  ASSERT_NE(best, std::string::npos) << out;
  ASSERT_NE(default_line, std::string::npos) << out;
  ASSERT_NE(cut, std::string::npos) << out;
  EXPECT_LT(best, default_line);
  EXPECT_LT(default_line, cut);
  EXPECT_NE(out.find("(default)", default_line), std::string::npos);
  EXPECT_NE(out.find("(cut)", cut), std::string::npos);
  EXPECT_NE(out.find("dropped rows=64 cols=16"), std::string::npos) << "wrong results are listed";
  EXPECT_NE(out.find("100.0 TFLOP/s"), std::string::npos) << "1e12 FLOP in 10 ms";
}

TEST(TuneReport, ListsNoCandidatesByDefault) {
  testing::internal::CaptureStdout();
  print_configuration("bf16 D=64 non-causal", {two_candidates()});
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out.find("   40.000 ms"), std::string::npos) << out;
  EXPECT_NE(out.find("dropped"), std::string::npos);
}

}  // namespace
}  // namespace flashgen::cli
