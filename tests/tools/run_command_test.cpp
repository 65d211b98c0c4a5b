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

TEST_F(RunCommand, ANegativeSoftcapIsRefusedByName) {
  const Outcome o = run_cli("run --backend cpu --seq 8 --dim 8 --softcap -1");
  EXPECT_NE(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "--softcap")) << o.output;
}

}  // namespace
