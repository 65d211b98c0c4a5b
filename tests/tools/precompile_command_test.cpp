// `flashgen precompile` run as a user runs it: which kernels a deployment's
// options compile (masks, score modifiers, decode steps) into a fresh cache
// directory, and the messages of bad options. NVRTC compiles here; no GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "cli_runner.hpp"

namespace {

using namespace flashgen::cli::test;

class PrecompileCommand : public CommandTest {
 protected:
  void SetUp() override {
    CommandTest::SetUp();
    if (IsSkipped()) return;
    if (contains(run_cli("info").output, "NVRTC:         unavailable"))
      GTEST_SKIP() << "no NVRTC here";
    cache_ = std::filesystem::temp_directory_path() /
             ("flashgen_precompile_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(cache_);
    ::setenv("FLASHGEN_CACHE_DIR", cache_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("FLASHGEN_CACHE_DIR");
    std::filesystem::remove_all(cache_);
  }
  Outcome precompile(const std::string& arguments) {
    return run_cli("precompile --threads 2 " + arguments);
  }
  std::filesystem::path cache_;
};

// Short and long sequences: a short problem's forward walks its tiles
// (schedule=persistent), a long one's runs on the grid of its table row;
// both with their warpgroups taking turns (pingpong=1).
TEST_F(PrecompileCommand, ShortAndLongSequences) {
  const Outcome o = precompile("--dims 64 --kinds forward");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "schedule=persistent pingpong=1: ")) << o.output;
  EXPECT_TRUE(contains(o.output, "copy=tma swizzle=32 pingpong=1: ")) << o.output;
  EXPECT_TRUE(contains(o.output, "2 kernels in ")) << o.output;
  const Outcome long_only = precompile("--dims 64 --kinds forward --seqs 8192");
  EXPECT_TRUE(contains(long_only.output, "1 kernels in ")) << long_only.output;
  EXPECT_FALSE(contains(long_only.output, "schedule=persistent")) << long_only.output;
  const Outcome none = run_cli("precompile --dims 64 --seqs 0");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_TRUE(contains(none.output, "--seqs")) << none.output;
}

// --dv: a value head dimension other than the queries' and keys' (MLA's
// Dqk = 192, Dv = 128), for every kernel of the call.
TEST_F(PrecompileCommand, ValueHeadDimension) {
  const Outcome o = precompile("--dims 192 --dv 128 --kinds forward,backward --seqs 8192");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  for (const char* kind : {"forward", "backward_query", "backward_key_value"})
    EXPECT_TRUE(contains(o.output, std::string("] ") + kind + " bf16 dqk=192 dv=128 ")) << kind;
  EXPECT_FALSE(contains(o.output, "dv=192")) << o.output;
  const Outcome bad = run_cli("precompile --dims 192 --dv 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "--dv")) << bad.output;
}

// gpt-oss style: a window and sinks, with decode steps of 8 query heads per
// key/value head, which pack as rows: the split-key forward (no window left,
// no sink) and its combine (the sinks) besides the plain forward (under a
// window of 128, 64-row mma.sync blocks at every length, the decode steps'
// packed heads too).
TEST_F(PrecompileCommand, DecodeStepsWithAWindowAndSinks) {
  const Outcome o =
      precompile("--dims 64 --kinds forward --decode 8 --window=128,0 --sinks --causal 1");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "dqk=64 dv=64 causal=1 vec=8 sm_90a window sinks |")) << o.output;
  EXPECT_TRUE(contains(o.output, "dqk=64 dv=64 causal=0 vec=8 sm_90a split_keys |")) << o.output;
  EXPECT_TRUE(contains(o.output, "forward_combine bf16 dqk=64 dv=64 causal=0 vec=8 sm_90a sinks |"))
      << o.output;
  EXPECT_TRUE(contains(o.output, "4 kernels in ")) << o.output;
  EXPECT_FALSE(contains(o.output, "FAILED")) << o.output;
}

// Decode steps over a KV cache: the split-key forward that reads a
// contiguous cache and the one that reads a paged cache, beside the plain
// call's (short and long sequences); the combine is shared. Each in the
// shape a decode step's one query row gets (two warps over 32 keys, an
// fp8 cache's four over 64), not the shape of the --seqs lengths' rows.
TEST_F(PrecompileCommand, DecodeStepsOverAKVCache) {
  const Outcome o = precompile("--dims 128 --kinds forward --decode 4 --kv-cache both");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  for (const char* layout : {"", " kv_cache=contiguous", " kv_cache=paged"})
    EXPECT_TRUE(contains(o.output, std::string("dqk=128 dv=128 causal=0 vec=8 sm_90a split_keys") +
                                       layout + " | rows=16 cols=32 head=0 warps=2 "))
        << layout << "\n" << o.output;
  const Outcome fp8 = precompile("--dims 128 --kinds forward --decode 4 --kv-cache paged --fp8-cache");
  EXPECT_TRUE(contains(fp8.output, "split_keys kv_cache=paged e4m3 | rows=16 cols=64 head=0 warps=4 "))
      << fp8.output;
  EXPECT_TRUE(contains(o.output, "6 kernels in ")) << o.output;
  EXPECT_FALSE(contains(o.output, "FAILED")) << o.output;
}

// A user mask compiles with its expression, mask_blocks included; the
// deterministic backward of sinks adds their gradient's kernel.
TEST_F(PrecompileCommand, AUserMaskAndTheBackwardsKernels) {
  const Outcome o = precompile("--dims 40 --kinds forward,backward "
                               "--mask-mod 'doc[kv_idx] == doc[q_idx]' --mask-arrays doc:i");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  for (const char* kind : {"mask_blocks", "forward", "backward_query", "backward_key_value"})
    EXPECT_TRUE(contains(o.output, std::string("] ") + kind + " bf16 dqk=40 dv=40 ")) << kind;
  EXPECT_TRUE(contains(o.output, " mask=")) << o.output;
  const Outcome sinks = precompile("--dims 40 --kinds backward --sinks");
  EXPECT_TRUE(contains(sinks.output, "] backward_sinks ")) << sinks.output;
}

TEST_F(PrecompileCommand, BadOptionsNameTheRule) {
  const Outcome mask = run_cli("precompile --dims 64 --mask-mod 'doc[kv_idx] == 0'");
  EXPECT_EQ(mask.exit_code, 2) << mask.output;
  EXPECT_TRUE(contains(mask.output, "flashgen precompile: --mask-mod / --mask-arrays: "
                                    "mask_mod: unknown name \"doc\""))
      << mask.output;
  const Outcome window = run_cli("precompile --dims 64 --window 5");
  EXPECT_EQ(window.exit_code, 2) << window.output;
  EXPECT_TRUE(contains(window.output, "--window takes two integers, LEFT,RIGHT")) << window.output;
}

}  // namespace
