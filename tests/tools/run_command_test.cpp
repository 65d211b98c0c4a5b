// `flashgen run` as the sanitizer sweep runs it (scripts/sanitize.py): the
// masks and score modifiers reach the library and the fp64 check, on the
// CPU backend here (the same options drive the GPU kernels there).
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.hpp"

namespace {

using namespace flashgen::cli::test;

class RunCommand : public CommandTest {};

TEST_F(RunCommand, EveryModifierPassesTheCheck) {
  const Outcome o = run_cli(
      "run --backend cpu --batch 1 --seq 40 --seq-kv 70 --dim 24 --heads 4 --heads-kv 2 "
      "--causal --top-left --window-left 20 --window-right 3 --softcap 3 --sinks --alibi");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "softcap=3")) << o.output;
  EXPECT_TRUE(contains(o.output, "\nPASS")) << o.output;
}

TEST_F(RunCommand, AUserMaskOverDocumentsPassesTheCheck) {
  const Outcome o = run_cli(
      "run --backend cpu --batch 1 --seq 60 --dim 16 --heads 2 --causal "
      "--mask-mod doc[kv_idx]==doc[q_idx] --documents 7,20,1");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "\nPASS")) << o.output;
  const Outcome bad =
      run_cli("run --backend cpu --seq 8 --dim 8 --mask-mod doc[0]==0 --documents 3,x");
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_TRUE(contains(bad.output, "--documents")) << bad.output;
}

TEST_F(RunCommand, NoCheckTimesWithoutTheReference) {
  const Outcome o = run_cli("run --backend cpu --batch 1 --seq 32 --dim 16 --heads 2 --no-check");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "check:          skipped")) << o.output;
  EXPECT_FALSE(contains(o.output, "PASS")) << o.output;
}

TEST_F(RunCommand, ANegativeSoftcapIsRefusedByName) {
  const Outcome o = run_cli("run --backend cpu --seq 8 --dim 8 --softcap -1");
  EXPECT_NE(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "--softcap")) << o.output;
}

}  // namespace
