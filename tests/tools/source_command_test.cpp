// `flashgen source` run as a user runs it: the built binary (FLASHGEN_CLI,
// set by tests/CMakeLists.txt), its output, messages and exit codes.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.hpp"

namespace {

using namespace flashgen::cli::test;

class SourceCommand : public CommandTest {};

TEST_F(SourceCommand, PrintsTheSpecAndTheEntryPoint) {
  const Outcome o = run_cli("source --kind forward --dqk 127");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_EQ(o.output.rfind("// forward bf16 dqk=127 dv=127 causal=0 vec=1 sm_90a | rows=", 0), 0u)
      << o.output;
  EXPECT_TRUE(contains(o.output, "extern \"C\" __global__")) << o.output;
  EXPECT_TRUE(contains(o.output, "#include \"kernels/forward/wgmma_producer.cuh\"")) << o.output;
}

TEST_F(SourceCommand, EveryKindWithItsOptions) {
  for (const char* kind : {"forward", "backward_query", "backward_key_value", "backward_atomic",
                           "backward_prepare", "convert_grad_q", "forward_combine",
                           "backward_sinks"}) {
    const Outcome o = run_cli(std::string("source --kind ") + kind +
                              " --dqk 96 --dv 80 --dtype f16 --causal --vec 4 --arch sm_80");
      EXPECT_EQ(o.exit_code, 0) << kind << ": " << o.output;
    EXPECT_TRUE(contains(o.output, std::string(kind) + " f16 dqk=96 dv=80 causal=1 vec=4 sm_80"))
        << o.output;
    EXPECT_TRUE(contains(o.output, "extern \"C\"")) << o.output;
  }
}

TEST_F(SourceCommand, SplitKeysForward) {
  const Outcome o = run_cli("source --kind forward --dqk 128 --split-keys");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "dqk=128 dv=128 causal=0 vec=8 sm_90a split_keys | rows=16 "))
      << o.output;
  EXPECT_TRUE(contains(o.output, "kSplitKeys = true")) << o.output;
  const Outcome refused =
      run_cli("source --kind backward_query --dqk 128 --split-keys");
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_TRUE(contains(refused.output, "split_keys is a forward")) << refused.output;
}

TEST_F(SourceCommand, UserMaskSplicedWithItsArrays) {
  const Outcome o = run_cli("source --kind mask_blocks --dqk 64 --causal "
                            "--mask-mod 'doc[kv_idx] == doc[q_idx] && w[h] > 0' "
                            "--mask-arrays doc:i,w:f");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, " mask=")) << o.output;
  EXPECT_TRUE(contains(o.output, "fg::mask_integer_at(p, 0, kv_idx, fault)")) << o.output;
  EXPECT_TRUE(contains(o.output, "fg::mask_floating_at(p, 1, h, fault)")) << o.output;
  EXPECT_TRUE(contains(o.output, "typedef UserMask Mask;")) << o.output;
  const Outcome unknown =
      run_cli("source --kind forward --dqk 64 --mask-mod 'doc[kv_idx] == 0'");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_TRUE(contains(unknown.output, "--mask-mod")) << unknown.output;
  EXPECT_TRUE(contains(unknown.output, "unknown name \"doc\"")) << unknown.output;
}

TEST_F(SourceCommand, GivenTuning) {
  const Outcome o = run_cli("source --kind backward_query --dqk 64 "
                            "--tuning 'rows=128 cols=32 head=0 warps=4 cache=none'");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "| rows=128 cols=32 head=0 warps=4 cache=none |")) << o.output;
}

TEST_F(SourceCommand, HeadersAfterTheSource) {
  const Outcome o = run_cli("source --kind forward --dqk 64 --vec 1 --arch sm_80 --headers");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  const std::size_t entry = o.output.find("extern \"C\"");
  const std::size_t forward = o.output.find("// ---- file: kernels/forward/mma_sync.cuh ----");
  ASSERT_NE(forward, std::string::npos) << o.output;
  EXPECT_LT(entry, o.output.find("// ---- file: common.cuh ----"));
  EXPECT_LT(o.output.find("// ---- file: common.cuh ----"), forward);
}

TEST_F(SourceCommand, BadKindNamesTheOption) {
  const Outcome o = run_cli("source --kind sideways --dqk 64");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_TRUE(contains(o.output, "--kind must be one of forward, backward_query")) << o.output;
}

TEST_F(SourceCommand, MissingDimNamesTheOption) {
  const Outcome o = run_cli("source --kind forward");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_TRUE(contains(o.output, "--dqk is required")) << o.output;
}

TEST_F(SourceCommand, UnparsableTuningNamesTheOption) {
  const Outcome o = run_cli("source --kind forward --dqk 64 --tuning 'rows=many'");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_TRUE(contains(o.output, "--tuning 'rows=many'")) << o.output;
  EXPECT_TRUE(contains(o.output, "bad value in 'rows=many'")) << o.output;
}

TEST_F(SourceCommand, TuningThatDoesNotFitNamesTheOptionAndTheRule) {
  const Outcome o = run_cli("source --kind forward --dqk 64 --tuning 'rows=100 warps=4'");
  EXPECT_EQ(o.exit_code, 3) << o.output;
  EXPECT_TRUE(contains(o.output, "--tuning")) << o.output;
  EXPECT_TRUE(contains(o.output, "rows must be a positive multiple of 16 * warps")) << o.output;
  EXPECT_FALSE(contains(o.output, "extern \"C\"")) << o.output;
}

TEST_F(SourceCommand, HelpAndTheCommandList) {
  const Outcome help = run_cli("source --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.output, "usage: flashgen source --kind K --dqk D")) << help.output;
  EXPECT_TRUE(contains(help.output, "--headers")) << help.output;
  const Outcome list = run_cli("--help");
  EXPECT_TRUE(contains(list.output, "\n  source ")) << list.output;
}

}  // namespace
