// The CUDA backend through the public API: the standard cases, random
// shapes, both backward variants, and bit-identical gradients run to run.
// Every test reports SKIPPED where no GPU can run kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attention_case.hpp"
#include "attention_check.hpp"
#include "codegen/generate.hpp"
#include "device_storage.hpp"
#include "user_masks.hpp"
#include "test_tensor.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen::testing {
namespace {

Options gpu_options(bool deterministic = true) {
  Options options;
  options.backend = Backend::cuda;
  options.deterministic = deterministic;
  return options;
}

// The tensor-core kernels take f16 and bf16; f32 has its own tests below.
std::vector<Case> half_precision(std::vector<Case> cases) {
  std::vector<Case> out;
  for (const Case& c : cases)
    if (c.dtype != DType::f32) out.push_back(c);
  return out;
}

// The mask's diagonals, the score modifiers and a user mask
// (softmax/mask.cuh) on a list's shapes: the list, then six of its cases
// again, one with a two-sided sliding window, one with a left edge only
// (whole key blocks skipped from the front), one top-left causal (with
// seq_q < seq_kv, keys no query sees), one soft-capped with sinks, one with
// ALiBi, one with a user mask (documents, a float array and a select; a
// prefix-LM mask where some query's q_idx is negative).
std::vector<Case> with_masks(std::vector<Case> cases) {
  const std::size_t n = cases.size();
  for (std::size_t i = 0; i < 6 && i < n; ++i) {
    Case c = cases[(i * 2 + 1) % n];
    const std::int64_t width = std::max<std::int64_t>(1, c.seq_kv / 3);
    if (i == 0) {
      c.window_left = width;
      c.window_right = c.causal ? -1 : 17;
    } else if (i == 1) {
      c.window_left = width;
    } else if (i == 2) {
      c.causal = true;
      c.alignment = CausalAlignment::top_left;
    } else if (i == 3) {
      c.softcap = 2.5;
      c.sinks = true;
    } else if (i == 4) {
      c.alibi = 1;
    } else {
      c.user_mask = c.seq_q <= c.seq_kv || c.causal ? 3 : 2;
    }
    cases.push_back(c);
  }
  return cases;
}

// Windows, top-left causal, soft caps, sinks and ALiBi at shapes that cross
// several blocks each way: left edge only, right edge only, both, the
// diagonal alone, with causal, seq_q above and below seq_kv (rows and keys
// that see nothing), GQA, odd D, wide heads (value chunks, the split
// backward kernels), every dtype; Gemma 2's window and cap at D = 256 and
// gpt-oss's window and sinks at D = 64.
std::vector<Case> mask_cases() {
  constexpr auto top_left = CausalAlignment::top_left, bottom_right = CausalAlignment::bottom_right;
  constexpr auto plain = Placement::plain;
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout,
  // placement, window_left, window_right, alignment, softcap, sinks
  return {Case{1, 300, 333, 4, 2, 64, 64, true, DType::bf16, Layout::bshd, Placement::plain, 100},
          Case{2, 200, 130, 2, 1, 128, 128, false, DType::f16, Layout::bhsd, Placement::plain, 40,
               17},
          Case{1, 70, 300, 2, 1, 127, 127, true, DType::bf16, Layout::bshd, Placement::plain, -1,
               -1, top_left},
          Case{1, 300, 70, 4, 4, 40, 24, true, DType::f16, Layout::padded, Placement::plain, -1,
               -1, top_left},
          Case{1, 600, 600, 2, 1, 64, 48, false, DType::bf16, Layout::padded, Placement::plain,
               100, -1},
          Case{1, 200, 530, 3, 1, 72, 72, false, DType::f16, Layout::bshd, Placement::plain, -1,
               40},
          Case{1, 90, 60, 2, 2, 40, 40, false, DType::bf16, Layout::bhsd, Placement::plain, 0, 0},
          Case{1, 257, 300, 2, 2, 256, 256, true, DType::bf16, Layout::bshd, Placement::plain, 64},
          Case{1, 130, 200, 2, 1, 384, 384, false, DType::bf16, Layout::bshd, Placement::plain, 50,
               50},
          Case{1, 300, 280, 2, 1, 199, 199, true, DType::f32, Layout::bshd, Placement::plain, 64,
               16, top_left},
          Case{1, 1, 3000, 8, 2, 128, 128, true, DType::bf16, Layout::bshd, Placement::plain,
               700},
          Case{1, 300, 333, 4, 2, 64, 64, true, DType::bf16, Layout::bshd, plain, -1, -1,
               bottom_right, 2.0},
          Case{1, 200, 260, 4, 2, 256, 256, true, DType::bf16, Layout::bshd, plain, 64, -1,
               bottom_right, 3.0},
          Case{1, 130, 200, 2, 1, 384, 384, false, DType::f16, Layout::bhsd, plain, -1, -1,
               bottom_right, 1.5},
          Case{2, 130, 200, 4, 2, 64, 64, false, DType::bf16, Layout::bshd, plain, -1, -1,
               bottom_right, 0.0, true},
          Case{1, 300, 300, 4, 1, 64, 64, true, DType::bf16, Layout::bshd, plain, 50, -1,
               bottom_right, 0.0, true},
          Case{1, 300, 70, 2, 1, 40, 40, true, DType::f16, Layout::bhsd, plain, -1, -1,
               bottom_right, 0.0, true},
          Case{2, 280, 300, 4, 2, 127, 127, true, DType::bf16, Layout::padded, plain, 50, 0,
               top_left, 2.5, true},
          Case{1, 300, 280, 2, 1, 40, 72, true, DType::f32, Layout::bhsd, plain, 64, 16,
               top_left, 4.0, true},
          Case{1, 1, 2000, 8, 2, 128, 128, false, DType::bf16, Layout::bshd, plain, -1, -1,
               bottom_right, 5.0, true},
          Case{1, 300, 300, 4, 2, 64, 64, true, DType::bf16, Layout::bshd, plain, -1, -1,
               bottom_right, 0.0, false, 1},
          Case{2, 90, 140, 3, 1, 64, 80, false, DType::f16, Layout::bhsd, plain, 40, 30,
               bottom_right, 0.0, true, 2},
          Case{1, 200, 130, 2, 2, 127, 127, true, DType::bf16, Layout::padded, plain, -1, -1,
               top_left, 0.0, false, 1},
          Case{1, 130, 200, 2, 1, 384, 384, false, DType::bf16, Layout::bshd, plain, -1, -1,
               bottom_right, 0.0, false, 2},
          Case{1, 140, 260, 2, 1, 40, 40, true, DType::f32, Layout::bshd, plain, 64, -1,
               bottom_right, 0.0, true, 1},
          // ALiBi with the soft cap, whose gradient puts ALiBi's bias back
          // into the logit it finds from P: every backward family (the wgmma
          // kernels at D = 64 and 128, the split ones at 384, mma.sync at an
          // odd D, fp32), with windows and sinks.
          Case{1, 300, 333, 4, 2, 128, 128, true, DType::bf16, Layout::bshd, plain, -1, -1,
               bottom_right, 3.0, false, 1},
          Case{2, 200, 130, 4, 1, 64, 64, false, DType::f16, Layout::bhsd, plain, 40, 30,
               bottom_right, 2.0, true, 2},
          Case{1, 200, 260, 2, 2, 127, 127, true, DType::bf16, Layout::padded, plain, 64, -1,
               top_left, 5.0, false, 1},
          Case{1, 130, 200, 2, 1, 384, 384, false, DType::bf16, Layout::bshd, plain, -1, -1,
               bottom_right, 1.5, false, 2},
          Case{1, 140, 260, 2, 1, 40, 72, true, DType::f32, Layout::bshd, plain, -1, -1,
               bottom_right, 4.0, true, 1}};
}

// User masks (user_masks.hpp) on every kind of shape: packed documents with
// and without causal, GQA, odd and wide D, every dtype, decode (split keys),
// prefix-LM with seq_q < seq_kv, float arrays, computed indices and
// divisions (the checked path), rows left no key (with sinks), together
// with a window, a soft cap and ALiBi, and empty sequences.
std::vector<Case> user_mask_cases() {
  constexpr auto br = CausalAlignment::bottom_right;
  constexpr auto plain = Placement::plain;
  constexpr DType bf16 = DType::bf16, f16 = DType::f16, f32 = DType::f32;
  constexpr Layout bshd = Layout::bshd, bhsd = Layout::bhsd, padded = Layout::padded;
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout, placement,
  // window_left, window_right, alignment, softcap, sinks, alibi, user_mask
  return {Case{1, 560, 560, 4, 2, 64, 64, false, bf16, bshd, plain, -1, -1, br, 0.0, false, 0, 1},
          Case{2, 300, 300, 6, 2, 40, 40, true, f32, bhsd, plain, -1, -1, br, 0.0, false, 0, 1},
          Case{1, 280, 280, 2, 1, 127, 127, true, f16, padded, plain, -1, -1, br, 0.0, false, 0, 1},
          Case{1, 600, 600, 2, 1, 128, 128, true, bf16, bshd, plain, -1, -1, br, 0.0, false, 0, 1},
          Case{1, 300, 300, 2, 1, 256, 256, true, bf16, bshd, plain, -1, -1, br, 0.0, false, 0, 1},
          Case{1, 200, 200, 2, 1, 384, 384, false, f16, bshd, plain, -1, -1, br, 0.0, false, 0, 1},
          Case{1, 1, 3000, 8, 2, 128, 128, true, bf16, bshd, plain, -1, -1, br, 0.0, false, 0, 1},
          Case{2, 300, 300, 4, 1, 64, 48, false, bf16, bshd, plain, -1, -1, br, 0.0, false, 0, 2},
          Case{2, 130, 350, 2, 2, 127, 127, true, bf16, bhsd, plain, -1, -1, br, 0.0, false, 0, 2},
          Case{2, 130, 350, 2, 2, 127, 127, true, f32, bhsd, plain, -1, -1, br, 0.0, false, 0, 2},
          Case{2, 260, 300, 8, 4, 40, 40, false, bf16, bshd, plain, -1, -1, br, 0.0, false, 0, 3},
          Case{1, 300, 300, 2, 1, 72, 72, false, bf16, bhsd, plain, -1, -1, br, 0.0, false, 0, 4},
          Case{2, 200, 270, 3, 1, 40, 40, false, f16, padded, plain, -1, -1, br, 0.0, false, 0, 5},
          Case{2, 200, 270, 3, 1, 40, 40, false, f32, padded, plain, -1, -1, br, 0.0, false, 0, 5},
          Case{1, 300, 300, 2, 2, 64, 64, false, bf16, bshd, plain, -1, -1, br, 0.0, false, 0, 6},
          Case{1, 300, 300, 2, 2, 64, 64, false, bf16, bshd, plain, -1, -1, br, 0.0, true, 0, 6},
          Case{1, 400, 400, 4, 2, 40, 40, true, bf16, bshd, plain, 100, -1, br, 0.0, true, 0, 1},
          Case{1, 300, 300, 4, 2, 256, 256, true, bf16, bshd, plain, 64, -1, br, 3.0, false, 0, 1},
          Case{2, 200, 260, 4, 2, 64, 64, true, f16, bhsd, plain, -1, -1, br, 0.0, false, 2, 2},
          // No query, no key: nothing to evaluate (and no launch of an empty grid).
          Case{1, 0, 40, 2, 1, 64, 64, false, bf16, bshd, plain, -1, -1, br, 0.0, false, 0, 2},
          Case{1, 30, 0, 2, 1, 64, 64, false, bf16, bshd, plain, -1, -1, br, 0.0, false, 0, 2}};
}

// Shapes drawn at random (fixed seed): odd dims, lengths, GQA, layouts.
std::vector<Case> random_cases(int count) {
  std::mt19937 rng(20261202);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) {
    Case c;
    c.batch = pick(1, 2);
    c.heads_kv = pick(1, 3);
    c.heads_q = c.heads_kv * pick(1, 3);
    c.seq_q = pick(1, 300);
    c.seq_kv = pick(1, 300);
    c.dim_qk = pick(1, 320);
    c.dim_v = pick(0, 1) ? c.dim_qk : pick(1, 320);
    c.causal = pick(0, 1) == 1;
    c.dtype = pick(0, 1) ? DType::bf16 : DType::f16;
    const Layout layouts[] = {Layout::bshd, Layout::bhsd, Layout::padded};
    c.layout = layouts[pick(0, 2)];
    cases.push_back(c);
  }
  return cases;
}

// Rows aligned to 8 or 4 bytes only (packed D = 4 or 2 mod 8): the wgmma
// forward copies them with 8- or 4-byte cp.async; odd D and gathers stay on
// the mma.sync path, which the lists above cover.
std::vector<Case> partly_aligned_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  return {Case{1, 200, 333, 4, 2, 68, 68, false, DType::bf16, Layout::bshd},
          Case{2, 130, 130, 3, 3, 66, 66, true, DType::f16, Layout::bshd},
          Case{1, 77, 300, 2, 1, 36, 100, true, DType::bf16, Layout::bhsd},
          Case{1, 257, 129, 2, 2, 250, 250, false, DType::f16, Layout::bshd}};
}

// The wgmma backward kernels forced through a tuning (the query kernel is the
// default up to 128 columns, the key/value kernel where a table row says so):
// rows aligned to 16, 8, 4 or 2 bytes, GQA, causal, sequence edges. The key/value kernel holds dK and dV in registers:
// only Dqk + Dv <= 256.
std::vector<Case> wgmma_backward_cases(bool key_value) {
  std::vector<Case> cases;
  for (const Case& c : partly_aligned_cases())
    if (!key_value || c.dim_qk + c.dim_v <= 256) cases.push_back(c);
  cases.push_back(Case{2, 300, 333, 4, 2, 64, 64, true, DType::bf16, Layout::bshd});
  cases.push_back(Case{1, 130, 77, 3, 1, 128, 128, false, DType::f16, Layout::bshd});
  // Rows only 2-byte aligned: the query kernel stages K and V, the key/value
  // kernel Q and dO.
  cases.push_back(Case{1, 200, 333, 2, 1, 127, 127, true, DType::bf16, Layout::bshd});
  cases.push_back(Case{2, 77, 130, 3, 3, 63, 63, false, DType::f16, Layout::bshd});
  if (!key_value) cases.push_back(Case{1, 129, 65, 2, 2, 199, 120, false, DType::bf16, Layout::bhsd});
  return cases;
}

TuningParams wgmma_tuning() {
  TuningParams t{128, 32, 0, 8, 0};
  t.wgmma = true;
  return t;
}

// The forward with `tuning` forced, against the reference.
void expect_forward_with(const TuningParams& tuning, const Case& c) {
  const ScopedTuningOverride force(KernelKind::forward, tuning);
  EXPECT_TRUE(check_forward(c, gpu_options())) << tuning.to_string();
}

// The same where the tuning's shared memory fits the H200 for the case's
// dims on rows of alignment class `vec`; whether it did (and so ran).
bool expect_forward_where_it_fits(const TuningParams& tuning, const Case& c, int vec) {
  KernelSpec spec;
  spec.dim_qk = c.dim_qk;
  spec.dim_v = c.dim_v;
  spec.vec = vec;
  if (shared_bytes(spec, tuning) > shared_limit_of_arch("sm_90a")) return false;
  expect_forward_with(tuning, c);
  return true;
}

// The wgmma forward forced at one shape (rows=128 cols=32 head=256), whatever
// the tuning table picks: value dims past 256 split across CTAs of at most
// 256 columns, and rows that are only 2-byte aligned (odd D), staged and
// shifted into the tiles.
std::vector<Case> wgmma_opt_in_forward_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  return {Case{1, 200, 333, 2, 1, 384, 384, true, DType::bf16, Layout::bshd},
          Case{2, 77, 130, 2, 2, 320, 512, false, DType::f16, Layout::bhsd},
          Case{1, 129, 65, 2, 2, 300, 300, false, DType::bf16, Layout::bshd},
          Case{1, 200, 333, 2, 1, 127, 127, true, DType::bf16, Layout::bshd},
          Case{2, 77, 130, 3, 3, 199, 63, false, DType::f16, Layout::bshd},
          Case{1, 129, 65, 2, 2, 385, 385, true, DType::bf16, Layout::bshd},
          Case{1, 64, 64, 4, 1, 3, 3, true, DType::bf16, Layout::padded}};
}

class GpuForwardWgmmaOptIn : public ::testing::TestWithParam<Case> {};

TEST_P(GpuForwardWgmmaOptIn, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  TuningParams tuning = wgmma_tuning();
  tuning.head_block = 256;
  expect_forward_with(tuning, GetParam());
}

// Deeper K/V pipelines of the wgmma forward (tuning stages=3 or 4): sequence
// edges shorter than the pipeline, causal CTAs with no keys, GQA, rows
// aligned to 16, 8 or 4 bytes.
std::vector<Case> wgmma_stages_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  return {Case{2, 300, 333, 4, 2, 64, 64, true, DType::bf16, Layout::bshd},
          Case{1, 130, 77, 3, 1, 128, 128, false, DType::f16, Layout::bhsd},
          Case{1, 200, 7, 2, 2, 128, 128, true, DType::bf16, Layout::bshd},
          Case{1, 1, 500, 2, 2, 64, 64, false, DType::bf16, Layout::padded},
          Case{1, 200, 333, 4, 2, 68, 68, false, DType::bf16, Layout::bshd},
          Case{2, 130, 130, 3, 3, 66, 66, true, DType::f16, Layout::bshd},
          Case{1, 77, 300, 2, 1, 36, 100, true, DType::bf16, Layout::bhsd}};
}

class GpuForwardWgmmaStages : public ::testing::TestWithParam<Case> {};

TEST_P(GpuForwardWgmmaStages, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  for (int stages : {3, 4}) {
    TuningParams tuning = wgmma_tuning();
    tuning.block_cols = 64;
    tuning.stages = stages;
    expect_forward_with(tuning, GetParam());
  }
}

// The mma.sync forward with K and V in a ring (stages=2, 3), its warps
// over rows of their own or splitting each key block (split=keys: 2 and 4
// warps, 16 and 32 keys each), on the same cases: decode steps take the
// split-key kernel, the others the whole forward, whose sinks and
// normalisation follow the warps' merge.
class GpuForwardMmaSyncRing : public ::testing::TestWithParam<Case> {};

TEST_P(GpuForwardMmaSyncRing, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  TuningParams rows{64, 32, 0, 4, kCacheQ};
  for (int stages : {2, 3}) {
    rows.stages = stages;
    expect_forward_with(rows, GetParam());
  }
  for (const TuningParams& keys : {TuningParams{16, 64, 0, 4, 0}, TuningParams{16, 64, 0, 2, 0}}) {
    TuningParams t = keys;
    t.split = WarpgroupSplit::keys;
    expect_forward_with(t, GetParam());
    t.stages = 2;
    expect_forward_with(t, GetParam());
  }
}

// The wgmma forward with a producer warpgroup (tuning producer=warp), two
// and three computing warpgroups, on the same cases.
class GpuForwardWgmmaProducer : public ::testing::TestWithParam<Case> {};

// The wgmma forward with a producer warpgroup of `warps` computing warps,
// copying with cp.async or TMA.
TuningParams forward_producer_tuning(int warps, const Case& c, bool tma) {
  TuningParams tuning = wgmma_tuning();
  tuning.warps = warps;
  tuning.block_rows = 16 * warps;
  tuning.block_cols = c.dim_v > 256 ? 32 : 64;
  tuning.head_block = c.dim_v > 256 ? 256 : 0;
  tuning.producer = true;
  tuning.tma = tma;
  return tuning;
}

TEST_P(GpuForwardWgmmaProducer, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  for (int warps : {8, 12}) {
    expect_forward_with(forward_producer_tuning(warps, GetParam(), false), GetParam());
  }
}

// The producer copying K and V with TMA (tuning copy=tma), two and three
// computing warpgroups, K and V three and two stages deep (each in a
// pipeline of its own), on the cases with 16-byte aligned rows (D a multiple
// of 8; the value dims past 256 split into chunks of 256), where the shared
// memory holds them.
class GpuForwardWgmmaTma : public ::testing::TestWithParam<Case> {};

// The TMA forward of two and three computing warpgroups, three and two
// stages deep, with tiles laid out as `swizzle` says (TuningParams::swizzle).
void expect_tma_forward(const Case& c, int swizzle) {
  // Odd dims: token rows, whose tiles are wider (sized here for the widest).
  const bool token_rows = c.dim_qk % 8 != 0 || c.dim_v % 8 != 0;
  for (int warps : {8, 12})
    for (int stages : {3, 2}) {
      // Three warpgroups beside a producer get 160 registers each (their
      // setmaxnreg share, which ptxas compiles them for): O of 129 to 256
      // columns beside S does not compile there, nor the wider value chunks
      // of token rows past D = 320 (the default's rule).
      if (warps == 12 && ((c.dim_v > 128 && c.dim_v <= 256) || (token_rows && c.dim_v > 320)))
        continue;
      TuningParams tuning = forward_producer_tuning(warps, c, true);
      tuning.stages = stages;
      tuning.swizzle = swizzle;
      expect_forward_where_it_fits(tuning, c, token_rows ? 1 : 8);
    }
}

TEST_P(GpuForwardWgmmaTma, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  expect_tma_forward(GetParam(), 0);
}

std::vector<Case> wgmma_tma_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  return {Case{2, 300, 333, 4, 2, 64, 64, true, DType::bf16, Layout::bshd},
          Case{1, 130, 77, 3, 1, 128, 128, false, DType::f16, Layout::bhsd},
          Case{1, 200, 7, 2, 2, 128, 128, true, DType::bf16, Layout::bshd},
          Case{1, 1, 500, 2, 2, 64, 64, false, DType::bf16, Layout::padded},
          Case{1, 77, 300, 2, 1, 40, 104, true, DType::bf16, Layout::bhsd},
          Case{2, 129, 200, 2, 2, 72, 72, false, DType::f16, Layout::bshd},
          Case{1, 200, 333, 2, 1, 384, 384, true, DType::bf16, Layout::bshd},
          Case{1, 150, 263, 2, 2, 256, 256, false, DType::bf16, Layout::bshd},
          Case{1, 100, 170, 2, 1, 512, 512, true, DType::f16, Layout::bhsd}};
}

// The TMA forward copying whole 32-byte sectors into 32-byte-swizzled tiles
// (swizzle=32): two and three computing warpgroups, K and V three and two
// stages deep, on the TMA cases (D a multiple of 8: a last 16-column panel
// half past the row; value dims past 256 in chunks of 256).
class GpuForwardWgmmaSwizzled : public ::testing::TestWithParam<Case> {};

TEST_P(GpuForwardWgmmaSwizzled, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  expect_tma_forward(GetParam(), 32);
}

// The TMA forward walking its tiles (schedule=persistent): two and three
// computing warpgroups, K and V two and three stages deep, swizzled tiles,
// at shapes of more tiles than the GPU has SMs (each CTA walks several, the
// stages and Q's two tiles carry over from one to the next): causal tiles
// with no keys (seq_q > seq_kv), last row blocks whose second and third
// warpgroups have no rows, one query row, GQA, Dqk != Dv; and the masks and
// score modifiers on some of them.
class GpuForwardPersistent : public ::testing::TestWithParam<Case> {};

TEST_P(GpuForwardPersistent, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  int walked = 0;
  for (int warps : {8, 12})
    for (int stages : {2, 3}) {
      if (warps == 12 && c.dim_v > 128) continue;  // as in expect_tma_forward
      TuningParams tuning = forward_producer_tuning(warps, c, true);
      tuning.stages = stages;
      tuning.swizzle = 32;
      tuning.persistent = true;
      walked += expect_forward_where_it_fits(tuning, c, 8);
    }
  EXPECT_GT(walked, 0) << "no walking tuning fits " << c.to_string();
}

std::vector<Case> persistent_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  return {Case{6, 300, 333, 16, 4, 64, 64, true, DType::bf16, Layout::bshd},
          Case{3, 700, 200, 16, 16, 128, 128, true, DType::bf16, Layout::bshd},
          Case{2, 600, 500, 24, 8, 128, 128, false, DType::f16, Layout::bhsd},
          Case{4, 257, 300, 20, 2, 40, 104, true, DType::bf16, Layout::bhsd},
          Case{8, 70, 300, 24, 24, 64, 64, false, DType::bf16, Layout::bshd},
          Case{1, 1, 500, 160, 160, 64, 64, false, DType::bf16, Layout::padded},
          Case{2, 200, 900, 40, 8, 192, 128, true, DType::bf16, Layout::bshd}};
}

// The warpgroups issuing their GEMMs in turns (pingpong=1): two and three
// computing warpgroups, copying by TMA (token rows at odd D) and by
// cp.async, walking their tiles where the walk can run, on the persistent
// cases (several tiles a CTA: the turns go on from tile to tile) and on
// odd and wide heads.
class GpuForwardPingPong : public ::testing::TestWithParam<Case> {};

TEST_P(GpuForwardPingPong, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  const bool token_rows = c.dim_qk % 8 != 0 || c.dim_v % 8 != 0;
  int ran = 0;
  for (int warps : {8, 12})
    for (bool tma : {false, true})
      for (bool walk : {false, true}) {
        if (warps == 12 && c.dim_v > 128) continue;  // as in expect_tma_forward
        if ((!tma && token_rows) || (walk && (!tma || token_rows || c.dim_v > 256))) continue;
        TuningParams tuning = forward_producer_tuning(warps, c, tma);
        tuning.stages = tma ? 2 : 3;
        tuning.swizzle = tma ? 32 : 0;
        tuning.persistent = walk;
        tuning.pingpong = true;
        ran += expect_forward_where_it_fits(tuning, c, token_rows ? 1 : 8);
      }
  EXPECT_GT(ran, 0) << "no tuning fits " << c.to_string();
}

std::vector<Case> pingpong_cases() {
  std::vector<Case> cases = persistent_cases();
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  cases.push_back(Case{2, 300, 333, 16, 8, 127, 127, true, DType::bf16, Layout::bshd});
  cases.push_back(Case{1, 150, 263, 2, 2, 256, 256, false, DType::bf16, Layout::bshd});
  cases.push_back(Case{1, 100, 170, 2, 1, 512, 512, true, DType::f16, Layout::bhsd});
  return cases;
}

// The TMA forward on rows that are not 16-byte aligned (odd D), through
// the token-row views (tensor_maps.hpp): the same tunings as above. Where
// a token's row is a multiple of 16 bytes (heads_kv · D even enough) TMA
// reads them; elsewhere (3 heads of 127, the heads-major layout) the call
// runs the default of such rows without TMA (tuning_without_tma).
class GpuForwardTokenRows : public ::testing::TestWithParam<Case> {};

TEST_P(GpuForwardTokenRows, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  expect_tma_forward(GetParam(), 32);
  expect_tma_forward(GetParam(), 0);
}

std::vector<Case> token_row_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  return {Case{2, 300, 333, 16, 8, 127, 127, true, DType::bf16, Layout::bshd},
          Case{1, 130, 77, 8, 8, 199, 199, false, DType::f16, Layout::bshd},
          Case{1, 200, 70, 4, 4, 100, 100, true, DType::bf16, Layout::bshd},
          Case{1, 77, 300, 8, 2, 68, 68, false, DType::bf16, Layout::bshd},
          Case{1, 150, 263, 8, 8, 257, 257, true, DType::bf16, Layout::bshd},
          Case{1, 100, 170, 8, 8, 385, 385, false, DType::bf16, Layout::bshd},
          Case{1, 64, 200, 8, 8, 63, 127, true, DType::f16, Layout::bshd},
          Case{1, 200, 300, 3, 3, 127, 127, false, DType::bf16, Layout::bshd},
          Case{1, 200, 300, 8, 8, 127, 127, true, DType::bf16, Layout::bhsd}};
}

// Token rows whose value tile the shift widens past 256 columns (up to
// 288): the default forward runs one CTA over all value columns, O in two
// products.
std::vector<Case> wide_token_row_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  return {Case{1, 150, 263, 8, 8, 257, 257, true, DType::bf16, Layout::bshd},
          Case{2, 130, 77, 8, 4, 255, 255, false, DType::f16, Layout::bshd},
          Case{1, 65, 300, 16, 8, 249, 249, true, DType::bf16, Layout::bshd},
          Case{1, 200, 130, 8, 8, 127, 263, false, DType::bf16, Layout::bshd}};
}

// The query backward's TMA producer on the same token rows (while its
// widened tiles keep dQ within 256 columns), through 8-column slices and
// swizzled panels.
class GpuBackwardQueryTokenRows : public ::testing::TestWithParam<Case> {};
void check_backward_with_tma(KernelKind kind, const Case& c,
                             TuningParams base = wgmma_tuning());  // below

TEST_P(GpuBackwardQueryTokenRows, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_backward_with_tma(KernelKind::backward_query, GetParam());
}

std::vector<Case> backward_token_row_cases() {
  std::vector<Case> cases;
  for (const Case& c : token_row_cases())
    if (c.dim_qk <= 240 && c.dim_v <= 240) cases.push_back(c);
  return cases;
}

// The key/value backward's TMA producers on the same token rows: the kernel
// whose warpgroups each hold dK and dV (while Dqk + Dv, as the user's dims,
// fit 256 columns) and the one whose two warpgroups split them
// (split=outputs). Only where each key/value head has one query head and
// the rows are token rows; elsewhere the plan copies without TMA, which
// these cases check too.
class GpuBackwardKeyValueTokenRows : public ::testing::TestWithParam<Case> {};

TEST_P(GpuBackwardKeyValueTokenRows, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  if ((c.dim_qk + 15) / 16 * 16 + (c.dim_v + 15) / 16 * 16 <= 256)
    check_backward_with_tma(KernelKind::backward_key_value, c);
  TuningParams split{64, 64, 0, 8, 0, true};
  split.split = WarpgroupSplit::outputs;
  check_backward_with_tma(KernelKind::backward_key_value, c, split);
}

// A token-row view's last slice of a head holds the next head's first
// columns: K and V of one head full of Inf and NaN leave every other head's
// output as it was, bit for bit, while that head's rows do change. The
// tuning copies by TMA, as the plan shows.
TEST(GpuAttention, TokenRowsIgnoreTheNextHeadsColumns) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  constexpr std::int64_t kSeq = 300, kHeadsQ = 16, kHeadsKv = 8, kPoisoned = 3;
  // 255 and 257: the default's one CTA over a value tile widened past 256
  // columns (O in two products); the others forced.
  for (int dim : {127, 100, 199, 385, 255, 257}) {
    const Case c{1, kSeq, kSeq, kHeadsQ, kHeadsKv, dim, dim, false, DType::bf16, Layout::bshd};
    std::unique_ptr<ScopedTuningOverride> force;
    if (dim != 255 && dim != 257)
      force = std::make_unique<ScopedTuningOverride>(KernelKind::forward,
                                                     forward_producer_tuning(8, c, true));
    TestTensor q(MemoryKind::cuda, DType::bf16, 1, kSeq, kHeadsQ, dim, Layout::bshd);
    TestTensor k(MemoryKind::cuda, DType::bf16, 1, kSeq, kHeadsKv, dim, Layout::bshd);
    TestTensor v(MemoryKind::cuda, DType::bf16, 1, kSeq, kHeadsKv, dim, Layout::bshd);
    TestTensor o(MemoryKind::cuda, DType::bf16, 1, kSeq, kHeadsQ, dim, Layout::bshd);
    TestTensor lse = TestTensor::row_stats(MemoryKind::cuda, 1, kHeadsQ, kSeq);
    q.fill_random(1), k.fill_random(2), v.fill_random(3);
    ForwardArgs a;
    a.q = q.view(), a.k = k.view(), a.v = v.view(), a.o = o.view(), a.lse = lse.stats_view();
    for (const std::string& kernel : plan_forward(a, gpu_options()).kernels) {
      EXPECT_NE(kernel.find("copy=tma"), std::string::npos) << kernel;
      if (!force) EXPECT_NE(kernel.find("head=0"), std::string::npos) << kernel;
    }
    forward(a, gpu_options());
    const std::vector<double> clean = o.values(o.download());
    k.fill_head(kPoisoned, std::numeric_limits<float>::infinity());
    v.fill_head(kPoisoned, std::numeric_limits<float>::quiet_NaN());
    forward(a, gpu_options());
    const std::vector<double> poisoned = o.values(o.download());
    ASSERT_EQ(clean.size(), poisoned.size());
    std::int64_t changed_elsewhere = 0, changed_there = 0;
    for (std::size_t i = 0; i < clean.size(); ++i) {
      const std::int64_t head = (static_cast<std::int64_t>(i) / dim) % kHeadsQ;
      const bool same = clean[i] == poisoned[i];
      if (head / (kHeadsQ / kHeadsKv) == kPoisoned)
        changed_there += same ? 0 : 1;
      else
        changed_elsewhere += same ? 0 : 1;
    }
    EXPECT_EQ(changed_elsewhere, 0) << "D = " << dim << ": outputs of other heads changed";
    EXPECT_GT(changed_there, 0) << "D = " << dim << ": the poisoned head's output did not change";
  }
}

// The same for the backward on token rows, both kernels copying by TMA
// (one query head per key/value head): Q, K, V and dO of one head full of
// Inf and NaN (O and LSE those of the clean inputs) leave every other head's
// dQ, dK and dV as they were, bit for bit.
TEST(GpuAttention, BackwardTokenRowsIgnoreTheNextHeadsColumns) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  constexpr std::int64_t kSeq = 300, kHeads = 8, kPoisoned = 3;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int dim : {127, 100, 199, 257, 385}) {
    // Past 128 columns the key/value kernel whose warpgroups split dK and dV;
    // past 256 both kernels' warpgroups split the head dims (at 385 with the
    // own rows' operands held in registers).
    TuningParams query{128, 32, 0, 8, 0, true};
    TuningParams key_value = dim > 128 ? TuningParams{64, 64, 0, 8, 0, true} : query;
    if (dim > 128) key_value.split = WarpgroupSplit::outputs;
    int stages = 0;
    if (dim > 256) {
      const bool held = dim > 384;
      query = TuningParams{64, 32, 0, 8, held ? kCacheQ : 0u, true};
      key_value = TuningParams{64, 32, 0, 8, held ? kCacheK | kCacheV : 0u, true};
      query.split = key_value.split = WarpgroupSplit::dims;
      stages = 2;
    }
    const ScopedTuningOverride force_query(KernelKind::backward_query,
                                           with_tma_producer(query, stages));
    const ScopedTuningOverride force_key_value(KernelKind::backward_key_value,
                                               with_tma_producer(key_value, stages));
    auto tensor = [&] {
      return TestTensor(MemoryKind::cuda, DType::bf16, 1, kSeq, kHeads, dim, Layout::bshd);
    };
    TestTensor q = tensor(), k = tensor(), v = tensor(), o = tensor(), grad_o = tensor();
    TestTensor grad_q = tensor(), grad_k = tensor(), grad_v = tensor();
    TestTensor lse = TestTensor::row_stats(MemoryKind::cuda, 1, kHeads, kSeq);
    q.fill_random(1), k.fill_random(2), v.fill_random(3), grad_o.fill_random(4);
    ForwardArgs f;
    f.q = q.view(), f.k = k.view(), f.v = v.view(), f.o = o.view(), f.lse = lse.stats_view();
    forward(f, gpu_options());
    BackwardArgs b;
    b.q = q.view(), b.k = k.view(), b.v = v.view(), b.o = o.view(), b.grad_o = grad_o.view();
    b.lse = lse.stats_view();
    b.grad_q = grad_q.view(), b.grad_k = grad_k.view(), b.grad_v = grad_v.view();
    for (const std::string& kernel : plan_backward(b, gpu_options(true)).kernels)
      if (kernel.find("backward_query") == 0 || kernel.find("backward_key_value") == 0)
        EXPECT_NE(kernel.find("copy=tma"), std::string::npos) << kernel;
    backward(b, gpu_options(true));
    const TestTensor* grads[] = {&grad_q, &grad_k, &grad_v};
    std::vector<double> clean[3];
    for (int i = 0; i < 3; ++i) clean[i] = grads[i]->values(grads[i]->download());
    q.fill_head(kPoisoned, inf), k.fill_head(kPoisoned, inf);
    v.fill_head(kPoisoned, nan), grad_o.fill_head(kPoisoned, nan);
    backward(b, gpu_options(true));
    const char* names[] = {"dQ", "dK", "dV"};
    for (int g = 0; g < 3; ++g) {
      const std::vector<double> poisoned = grads[g]->values(grads[g]->download());
      ASSERT_EQ(clean[g].size(), poisoned.size());
      std::int64_t changed_elsewhere = 0;
      for (std::size_t i = 0; i < poisoned.size(); ++i) {
        const std::int64_t head = (static_cast<std::int64_t>(i) / dim) % kHeads;
        const bool same = clean[g][i] == poisoned[i] ||
                          (std::isnan(clean[g][i]) && std::isnan(poisoned[i]));
        if (head != kPoisoned && !same) ++changed_elsewhere;
      }
      EXPECT_EQ(changed_elsewhere, 0) << "D = " << dim << ": " << names[g]
                                      << " of other heads changed";
    }
  }
}

class GpuForward : public ::testing::TestWithParam<Case> {};
class GpuBackward : public ::testing::TestWithParam<Case> {};
// The atomic kernels at every D, not only where the planner prefers them.
class GpuBackwardAtomic : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { setenv("FLASHGEN_BACKWARD", "atomic", 1); }
  void TearDown() override { unsetenv("FLASHGEN_BACKWARD"); }
};

class GpuBackwardWgmmaQuery : public ::testing::TestWithParam<Case> {};
class GpuBackwardWgmmaKeyValue : public ::testing::TestWithParam<Case> {};

TEST_P(GpuBackwardWgmmaQuery, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const ScopedTuningOverride force(KernelKind::backward_query, wgmma_tuning());
  EXPECT_TRUE(check_backward(GetParam(), gpu_options(true)));
}

TEST_P(GpuBackwardWgmmaKeyValue, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const ScopedTuningOverride force(KernelKind::backward_key_value, wgmma_tuning());
  EXPECT_TRUE(check_backward(GetParam(), gpu_options(true)));
}

// The backward kernels with a producer warpgroup (tuning producer=warp), on
// the rows they copy straight into the tiles (aligned to 4 bytes or more).
class GpuBackwardWgmmaQueryProducer : public ::testing::TestWithParam<Case> {};
class GpuBackwardWgmmaKeyValueProducer : public ::testing::TestWithParam<Case> {};

TEST_P(GpuBackwardWgmmaQueryProducer, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  TuningParams tuning = wgmma_tuning();
  tuning.producer = true;
  const ScopedTuningOverride force(KernelKind::backward_query, tuning);
  EXPECT_TRUE(check_backward(GetParam(), gpu_options(true)));
}

TEST_P(GpuBackwardWgmmaKeyValueProducer, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  TuningParams tuning = wgmma_tuning();
  tuning.producer = true;
  const ScopedTuningOverride force(KernelKind::backward_key_value, tuning);
  EXPECT_TRUE(check_backward(GetParam(), gpu_options(true)));
}

// The backward producers copying their traversed tiles with TMA
// (copy=tma): K and V for the query kernel, Q and dO for the key/value
// kernel, on the forward's TMA cases whose accumulators fit the registers;
// 8-column slices into the core-matrix layout and whole-sector 16-column
// panels into 32-byte-swizzled tiles (swizzle=32).
class GpuBackwardWgmmaQueryTma : public ::testing::TestWithParam<Case> {};
class GpuBackwardWgmmaKeyValueTma : public ::testing::TestWithParam<Case> {};

void check_backward_with_tma(KernelKind kind, const Case& c, TuningParams base) {
  for (int swizzle : {0, 32}) {
    TuningParams tuning = base;
    tuning.producer = true;
    tuning.tma = true;
    tuning.swizzle = swizzle;
    const ScopedTuningOverride force(kind, tuning);
    EXPECT_TRUE(check_backward(c, gpu_options(true))) << tuning.to_string();
  }
}

TEST_P(GpuBackwardWgmmaQueryTma, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_backward_with_tma(KernelKind::backward_query, GetParam());
}

TEST_P(GpuBackwardWgmmaKeyValueTma, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_backward_with_tma(KernelKind::backward_key_value, GetParam());
}

// The key/value backward whose two warpgroups share 64 keys and split dK
// and dV (split=outputs, TMA copies into swizzled tiles and as slices):
// heads past Dqk + Dv = 256, Dqk != Dv, causal, GQA, a single query row,
// edges of both sequences.
class GpuBackwardWgmmaKeyValueSplit : public ::testing::TestWithParam<Case> {};

TEST_P(GpuBackwardWgmmaKeyValueSplit, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  for (int swizzle : {32, 0}) {
    TuningParams tuning = with_tma_producer(TuningParams{64, 64, 0, 8, 0, true}, 0, swizzle);
    tuning.split = WarpgroupSplit::outputs;
    const ScopedTuningOverride force(KernelKind::backward_key_value, tuning);
    EXPECT_TRUE(check_backward(GetParam(), gpu_options(true))) << tuning.to_string();
  }
}

std::vector<Case> wgmma_key_value_split_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  return {Case{1, 150, 263, 2, 2, 256, 256, false, DType::bf16, Layout::bshd},
          Case{1, 200, 333, 4, 2, 192, 192, true, DType::bf16, Layout::bshd},
          Case{2, 77, 130, 2, 2, 136, 200, false, DType::f16, Layout::bhsd},
          Case{1, 130, 77, 3, 1, 256, 256, true, DType::bf16, Layout::padded},
          Case{1, 1, 500, 2, 2, 144, 144, false, DType::bf16, Layout::bshd},
          Case{1, 300, 64, 2, 1, 64, 64, true, DType::f16, Layout::bshd}};
}

// The query backward whose two warpgroups share 64 query rows and split the
// head dims (split=dims, K and V copied by TMA into swizzled tiles and as
// slices): heads past 256 and narrow ones, Dqk != Dv, causal, GQA, a single
// query row, edges of both sequences; K two to four stages deep, 16- to
// 48-key blocks (those that fit the shared memory); Q and dO in shared
// memory or held in registers.
class GpuBackwardWgmmaQuerySplit : public ::testing::TestWithParam<Case> {};

constexpr std::size_t kH200SharedBytesPerBlock = 232448;  // the opt-in limit (sm_90)

// A tuning with split=dims: traversed blocks, stages, swizzle, operands held
// in registers.
struct DimsSplitShape {
  int cols, stages, swizzle;
  unsigned cached;
};

// Checks the backward with `kind` forced to split=dims over each of `shapes`
// that fits the shared memory (odd dims: that of token-row tiles).
void check_backward_dims_split(KernelKind kind, const Case& c,
                               std::initializer_list<DimsSplitShape> shapes) {
  KernelSpec spec;
  spec.kind = kind;
  spec.dim_qk = c.dim_qk;
  spec.dim_v = c.dim_v;
  if (c.dim_qk % 8 != 0 || c.dim_v % 8 != 0) spec.vec = 1;
  int checked = 0;
  for (const DimsSplitShape& shape : shapes) {
    TuningParams tuning = with_tma_producer(TuningParams{64, shape.cols, 0, 8, shape.cached, true},
                                            shape.stages, shape.swizzle);
    tuning.split = WarpgroupSplit::dims;
    if (shared_bytes(spec, tuning) > kH200SharedBytesPerBlock) continue;
    const ScopedTuningOverride force(kind, tuning);
    EXPECT_TRUE(check_backward(c, gpu_options(true))) << tuning.to_string();
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no tuning fits the shared memory";
}

TEST_P(GpuBackwardWgmmaQuerySplit, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_backward_dims_split(KernelKind::backward_query, GetParam(),
                            {{32, 3, 32, 0},
                             {16, 2, 0, 0},
                             {48, 4, 32, 0},
                             {16, 3, 32, kCacheQ | kCacheGradO},
                             {32, 3, 32, kCacheQ},
                             {16, 3, 0, kCacheGradO}});
}

// The key/value backward with split=dims: a dV and a dK CTA per block of
// 64 keys, each of two warpgroups splitting the head dims (the query
// kernel's cases; Q and dO two or three stages deep; K of the dV CTA and V of
// the dK CTA in shared memory or registers).
class GpuBackwardWgmmaKeyValueDims : public ::testing::TestWithParam<Case> {};

TEST_P(GpuBackwardWgmmaKeyValueDims, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_backward_dims_split(KernelKind::backward_key_value, GetParam(),
                            {{32, 2, 32, 0},
                             {16, 3, 0, 0},
                             {48, 2, 32, kCacheK | kCacheV},
                             {16, 2, 32, kCacheK},
                             {16, 3, 32, kCacheV},
                             {32, 3, 32, kCacheK | kCacheV}});
}

std::vector<Case> wgmma_query_split_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  return {Case{1, 200, 333, 4, 2, 384, 384, true, DType::bf16, Layout::bshd},
          Case{2, 77, 130, 2, 2, 320, 512, false, DType::f16, Layout::bhsd},
          Case{1, 130, 77, 3, 1, 512, 512, true, DType::bf16, Layout::padded},
          Case{1, 1, 500, 2, 2, 288, 288, false, DType::bf16, Layout::bshd},
          Case{1, 65, 200, 2, 2, 448, 256, false, DType::bf16, Layout::bshd},
          Case{1, 150, 263, 2, 2, 136, 200, false, DType::bf16, Layout::bshd},
          Case{1, 300, 64, 2, 1, 64, 64, true, DType::f16, Layout::bshd}};
}

// The same on rows that are not 16-byte aligned: through token-row views
// (packed layouts whose token rows are whole 16-byte sectors; the key/value
// kernel where each key/value head has one query head), else the plan
// copies without TMA, which these cases check too (GQA, three heads of 385,
// heads-major).
std::vector<Case> token_row_split_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  return {Case{1, 150, 263, 8, 8, 257, 257, true, DType::bf16, Layout::bshd},
          Case{1, 100, 170, 8, 8, 385, 385, false, DType::bf16, Layout::bshd},
          Case{1, 77, 120, 4, 4, 300, 300, false, DType::f16, Layout::bshd},
          Case{1, 64, 100, 8, 8, 386, 386, true, DType::bf16, Layout::bshd},
          Case{1, 90, 140, 8, 8, 385, 257, false, DType::bf16, Layout::bshd},
          Case{1, 1, 300, 8, 8, 385, 385, false, DType::bf16, Layout::bshd},
          Case{1, 130, 200, 8, 2, 385, 385, true, DType::bf16, Layout::bshd},
          Case{1, 100, 90, 3, 3, 385, 385, false, DType::bf16, Layout::bshd},
          Case{1, 100, 130, 4, 4, 385, 385, true, DType::bf16, Layout::bhsd}};
}

// dQ in registers: Dqk <= 256; dK and dV: Dqk + Dv <= 256.
std::vector<Case> wgmma_backward_tma_cases(bool key_value) {
  std::vector<Case> kept;
  for (const Case& c : wgmma_tma_cases())
    if (key_value ? c.dim_qk + c.dim_v <= 256 : c.dim_qk <= 256) kept.push_back(c);
  return kept;
}

std::vector<Case> with_rows_aligned_to_four_bytes(const std::vector<Case>& cases) {
  std::vector<Case> kept;
  for (const Case& c : cases)
    if (c.dim_qk % 2 == 0 && c.dim_v % 2 == 0) kept.push_back(c);
  return kept;
}

// Decode under GQA: one query row, the query heads of a group packed as the
// rows of one tile (cuda/query_head_packing.cpp), and the keys shared by
// several CTAs whose partial results are combined (split_keys, from 512 keys
// where the query blocks leave SMs idle). Groups of 1 to 8, causal (which
// attends every key from one row) and not, short speculative query blocks
// (causal rows that see different keys), the three layouts, odd and aligned
// D, Dv != Dqk, windows, soft caps and sinks, storage that ends at an
// unmapped page.
std::vector<Case> decode_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  std::vector<Case> cases = {Case{3, 1, 700, 8, 2, 128, 128, true, DType::bf16, Layout::bshd},
                             Case{2, 1, 1025, 8, 1, 64, 64, false, DType::f16, Layout::bhsd},
                             Case{1, 1, 1300, 6, 3, 127, 127, true, DType::bf16, Layout::padded},
                             Case{1, 1, 300, 6, 3, 127, 127, true, DType::bf16, Layout::padded},
                             Case{1, 1, 2000, 4, 4, 64, 64, true, DType::bf16, Layout::bshd},
                             Case{1, 16, 3000, 8, 2, 128, 128, true, DType::bf16, Layout::bshd},
                             Case{2, 37, 1200, 2, 1, 80, 80, true, DType::f16, Layout::bhsd},
                             Case{1, 1, 5000, 2, 1, 512, 512, false, DType::bf16, Layout::bshd},
                             Case{2, 1, 77, 16, 2, 256, 256, false, DType::bf16, Layout::bshd},
                             Case{1, 1, 1, 4, 1, 40, 40, true, DType::bf16, Layout::bshd},
                             Case{2, 1, 513, 12, 4, 192, 128, true, DType::f16, Layout::bshd},
                             Case{1, 1, 4097, 32, 8, 128, 128, true, DType::bf16, Layout::bshd}};
  // Packed with what tells rows apart only by a range of keys or a sink by
  // row: gpt-oss's window and sinks (one share: the combine alone reads
  // sinks by row), Gemma's window and cap, top-left causal (one key), and
  // sinks over enough (batch, kv head) pairs to fill the GPU, and a user mask
// of keys alone.
  constexpr auto plain = Placement::plain;
  constexpr auto bottom_right = CausalAlignment::bottom_right;
  cases.push_back(Case{2, 1, 700, 64, 8, 64, 64, true, DType::bf16, Layout::bshd, plain, 128, -1,
                       bottom_right, 0.0, true});
  cases.push_back(Case{1, 1, 900, 8, 2, 256, 256, true, DType::bf16, Layout::bhsd, plain, 300, -1,
                       bottom_right, 50.0});
  cases.push_back(Case{1, 1, 300, 4, 2, 64, 64, true, DType::f16, Layout::bshd, plain, -1, -1,
                       CausalAlignment::top_left});
  cases.push_back(Case{40, 1, 600, 16, 4, 128, 128, false, DType::bf16, Layout::bshd, plain, -1,
                       -1, bottom_right, 0.0, true});
  // Tens of shares a row, merged by several warps each (combine_warps_per_row):
  // 64 shares over 8 warps, and 35 (unevenly over 4) with sinks by row.
  cases.push_back(Case{1, 1, 16500, 4, 1, 64, 64, true, DType::bf16, Layout::bshd});
  cases.push_back(Case{1, 1, 9000, 8, 2, 128, 128, false, DType::bf16, Layout::bshd, plain, -1,
                       -1, bottom_right, 0.0, true});
  Case keys_alone{3, 1, 1500, 8, 2, 128, 128, true, DType::bf16, Layout::bshd};
  keys_alone.user_mask = 7;
  cases.push_back(keys_alone);
  for (std::int64_t seq_kv : {300, 1500}) {
    Case at_page_end{2, 1, seq_kv, 8, 2, 127, 127, false, DType::bf16, Layout::bshd};
    at_page_end.placement = Placement::ends_at_unmapped_page;
    cases.push_back(at_page_end);
  }
  return cases;
}

TEST_P(GpuForward, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(check_forward(GetParam(), gpu_options()));
}

TEST_P(GpuBackward, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(check_backward(GetParam(), gpu_options(true)));
}

TEST_P(GpuBackwardAtomic, MatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(check_backward(GetParam(), gpu_options(false)));
}

// A user mask that reads past its array fails the call with the error the
// CPU backend gives (the pair and the index named), before any attention
// kernel runs; one whose reads a short circuit guards does not fail.
TEST(GpuUserMask, AnIndexOutsideItsArrayFailsTheCallNamingThePair) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const std::vector<std::int32_t> doc(100, 0);  // seq_kv is 150
  const std::unique_ptr<Storage> device_doc = make_storage(MemoryKind::cuda, 4 * doc.size());
  device_doc->upload(doc.data(), 4 * doc.size());
  const auto* ids = static_cast<const std::int32_t*>(device_doc->data());
  const Case c{1, 120, 150, 2, 1, 64, 64, false, DType::bf16, Layout::bshd};
  Options options = gpu_options();
  options.mask_tensors = {MaskTensorView::int32("doc", ids, 100, MemoryKind::cuda)};
  options.mask_mod = "doc[kv_idx] == doc[q_idx]";
  const ::testing::AssertionResult failed = check_forward(c, options);
  EXPECT_FALSE(failed);
  // Either faulting read may be found first (doc[q_idx] or doc[kv_idx]).
  const std::string message = failed.message();
  EXPECT_NE(message.find("of \"doc\" is outside [0, 100) in doc["), std::string::npos) << message;
  EXPECT_NE(message.find("at b = 0, h = "), std::string::npos) << message;
  options.mask_mod = "kv_idx < 100 && q_idx < 100 && doc[kv_idx] == doc[q_idx]";
  const MemoryKind gpu = MemoryKind::cuda;
  TestTensor q(gpu, DType::bf16, 1, 120, 2, 64, Layout::bshd);
  TestTensor o(gpu, DType::bf16, 1, 120, 2, 64, Layout::bshd);
  TestTensor k(gpu, DType::bf16, 1, 150, 1, 64, Layout::bshd);
  TestTensor v(gpu, DType::bf16, 1, 150, 1, 64, Layout::bshd);
  for (TestTensor* t : {&q, &k, &v}) t->fill_random(7);
  ForwardArgs args;
  args.q = q.view(), args.k = k.view(), args.v = v.view(), args.o = o.view();
  EXPECT_NO_THROW(forward(args, options));
}

INSTANTIATE_TEST_SUITE_P(Standard, GpuForward,
                         ::testing::ValuesIn(half_precision(standard_forward_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Decode, GpuForward, ::testing::ValuesIn(with_masks(decode_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Random, GpuForward, ::testing::ValuesIn(random_cases(24)), CaseName());
INSTANTIATE_TEST_SUITE_P(WideTokenRows, GpuForward,
                         ::testing::ValuesIn(with_masks(wide_token_row_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(PartlyAligned, GpuForward, ::testing::ValuesIn(with_masks(partly_aligned_cases())),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardWgmmaQuery,
                         ::testing::ValuesIn(with_masks(wgmma_backward_cases(false))), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardWgmmaKeyValue,
                         ::testing::ValuesIn(with_masks(wgmma_backward_cases(true))), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuForwardWgmmaStages, ::testing::ValuesIn(with_masks(wgmma_stages_cases())),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardWgmmaQueryProducer,
                         ::testing::ValuesIn(with_masks(with_rows_aligned_to_four_bytes(
                             wgmma_backward_cases(false)))),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardWgmmaKeyValueProducer,
                         ::testing::ValuesIn(with_masks(with_rows_aligned_to_four_bytes(
                             wgmma_backward_cases(true)))),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuForwardMmaSyncRing,
                         ::testing::ValuesIn(with_masks(wgmma_stages_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuForwardWgmmaProducer,
                         ::testing::ValuesIn(with_masks(wgmma_stages_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuForwardWgmmaTma, ::testing::ValuesIn(with_masks(wgmma_tma_cases())),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuForwardPersistent,
                         ::testing::ValuesIn(with_masks(persistent_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuForwardPingPong,
                         ::testing::ValuesIn(with_masks(pingpong_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuForwardTokenRows, ::testing::ValuesIn(with_masks(token_row_cases())),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardQueryTokenRows,
                         ::testing::ValuesIn(with_masks(backward_token_row_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardKeyValueTokenRows,
                         ::testing::ValuesIn(with_masks(backward_token_row_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuForwardWgmmaSwizzled, ::testing::ValuesIn(with_masks(wgmma_tma_cases())),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardWgmmaQueryTma,
                         ::testing::ValuesIn(with_masks(wgmma_backward_tma_cases(false))), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardWgmmaKeyValueTma,
                         ::testing::ValuesIn(with_masks(wgmma_backward_tma_cases(true))), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardWgmmaQuerySplit,
                         ::testing::ValuesIn(with_masks(wgmma_query_split_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardWgmmaKeyValueDims,
                         ::testing::ValuesIn(with_masks(wgmma_query_split_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(TokenRows, GpuBackwardWgmmaQuerySplit,
                         ::testing::ValuesIn(with_masks(token_row_split_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(TokenRows, GpuBackwardWgmmaKeyValueDims,
                         ::testing::ValuesIn(with_masks(token_row_split_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuBackwardWgmmaKeyValueSplit,
                         ::testing::ValuesIn(with_masks(wgmma_key_value_split_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Forced, GpuForwardWgmmaOptIn,
                         ::testing::ValuesIn(with_masks(wgmma_opt_in_forward_cases())), CaseName());
INSTANTIATE_TEST_SUITE_P(Masks, GpuForward, ::testing::ValuesIn(mask_cases()), CaseName());
INSTANTIATE_TEST_SUITE_P(Masks, GpuBackward, ::testing::ValuesIn(mask_cases()), CaseName());
INSTANTIATE_TEST_SUITE_P(Masks, GpuBackwardAtomic, ::testing::ValuesIn(mask_cases()), CaseName());
INSTANTIATE_TEST_SUITE_P(UserMasks, GpuForward, ::testing::ValuesIn(user_mask_cases()), CaseName());
INSTANTIATE_TEST_SUITE_P(UserMasks, GpuBackward, ::testing::ValuesIn(user_mask_cases()),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(UserMasks, GpuBackwardAtomic, ::testing::ValuesIn(user_mask_cases()),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Standard, GpuBackward,
                         ::testing::ValuesIn(half_precision(standard_backward_cases())),
                         CaseName());
// Empty problems launch nothing, or only the key/value kernel that writes
// zero gradients (no query heads), on every dtype.
INSTANTIATE_TEST_SUITE_P(Empty, GpuForward, ::testing::ValuesIn(empty_cases()), CaseName());
INSTANTIATE_TEST_SUITE_P(Empty, GpuBackward, ::testing::ValuesIn(empty_cases()), CaseName());
INSTANTIATE_TEST_SUITE_P(Empty, GpuBackwardAtomic, ::testing::ValuesIn(empty_cases()), CaseName());
// Over-reads fault in an ordinary run: every tensor ends at an unmapped page.
INSTANTIATE_TEST_SUITE_P(PageEnd, GpuForward, ::testing::ValuesIn(page_end_cases()), CaseName());
INSTANTIATE_TEST_SUITE_P(PageEnd, GpuBackward, ::testing::ValuesIn(page_end_cases()), CaseName());
INSTANTIATE_TEST_SUITE_P(PageEnd, GpuBackwardAtomic, ::testing::ValuesIn(page_end_cases()),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Random, GpuBackward, ::testing::ValuesIn(random_cases(24)), CaseName());
INSTANTIATE_TEST_SUITE_P(Standard, GpuBackwardAtomic,
                         ::testing::ValuesIn(half_precision(standard_backward_cases())),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(Random, GpuBackwardAtomic, ::testing::ValuesIn(random_cases(12)),
                         CaseName());

// Same inputs, same gradients, to the bit: the two-kernel backward has no
// atomics and a fixed summation order. GQA makes several query heads feed
// one dK/dV, the case where atomics would reorder sums.
TEST(GpuAttention, DeterministicBackwardIsBitIdentical) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const MemoryKind gpu = MemoryKind::cuda;
  const std::int64_t b = 2, s = 1000, hq = 8, hkv = 2, d = 128;
  TestTensor q(gpu, DType::bf16, b, s, hq, d, Layout::bshd);
  TestTensor k(gpu, DType::bf16, b, s, hkv, d, Layout::bshd);
  TestTensor v(gpu, DType::bf16, b, s, hkv, d, Layout::bshd);
  TestTensor o(gpu, DType::bf16, b, s, hq, d, Layout::bshd);
  TestTensor grad_o(gpu, DType::bf16, b, s, hq, d, Layout::bshd);
  TestTensor lse = TestTensor::row_stats(gpu, b, hq, s);
  q.fill_random(1);
  k.fill_random(2);
  v.fill_random(3);
  grad_o.fill_random(4);
  Options options = gpu_options(true);
  options.causal = true;
  forward({q.view(), k.view(), v.view(), o.view(), lse.stats_view()}, options);

  std::vector<std::vector<unsigned char>> first;
  for (int run = 0; run < 3; ++run) {
    TestTensor grad_q(gpu, DType::bf16, b, s, hq, d, Layout::bshd);
    TestTensor grad_k(gpu, DType::bf16, b, s, hkv, d, Layout::bshd);
    TestTensor grad_v(gpu, DType::bf16, b, s, hkv, d, Layout::bshd);
    grad_q.poison();
    grad_k.poison();
    grad_v.poison();
    BackwardArgs args{q.view(),      k.view(),      v.view(),     o.view(),
                      grad_o.view(), lse.stats_view(), grad_q.view(), grad_k.view(),
                      grad_v.view()};
    backward(args, options);
    std::vector<std::vector<unsigned char>> now = {grad_q.download(), grad_k.download(),
                                                   grad_v.download()};
    if (run == 0) {
      first = now;
      continue;
    }
    const char* names[] = {"dQ", "dK", "dV"};
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(now[i] == first[i]) << names[i] << " differs between run 0 and run " << run;
  }
}

// K and V shared by the batch through a zero batch stride (a broadcast
// view, as torch's expand makes): TMA cannot describe them, so the kernels
// whose producer copies by TMA run without it, and those that copy by TMA
// only (the warpgroup splits: split=outputs at D = 192, split=dims at 384)
// give way to the defaults that do not. Checked against the CPU backend on
// the same views.
TEST(GpuAttention, BroadcastKeysAndValuesRunWithoutTma) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  constexpr std::int64_t kBatch = 2, kSeq = 200, kHeads = 2;
  struct Side {
    Side(MemoryKind memory, std::int64_t dim)
        : q(memory, DType::bf16, kBatch, kSeq, kHeads, dim, Layout::bshd),
          k(memory, DType::bf16, 1, kSeq, kHeads, dim, Layout::bshd),
          v(memory, DType::bf16, 1, kSeq, kHeads, dim, Layout::bshd),
          grad_o(memory, DType::bf16, kBatch, kSeq, kHeads, dim, Layout::bshd),
          o(memory, DType::bf16, kBatch, kSeq, kHeads, dim, Layout::bshd),
          grad_q(memory, DType::bf16, kBatch, kSeq, kHeads, dim, Layout::bshd),
          grad_k(memory, DType::bf16, kBatch, kSeq, kHeads, dim, Layout::bshd),
          grad_v(memory, DType::bf16, kBatch, kSeq, kHeads, dim, Layout::bshd),
          lse(TestTensor::row_stats(memory, kBatch, kHeads, kSeq)) {
      q.fill_random(1), k.fill_random(2), v.fill_random(3), grad_o.fill_random(4);
    }
    static TensorView broadcast(const TestTensor& t) {
      TensorView view = t.view();
      view.shape[0] = kBatch;
      view.stride[0] = 0;
      return view;
    }
    ForwardArgs forward_args() const {
      ForwardArgs a;
      a.q = q.view(), a.k = broadcast(k), a.v = broadcast(v);
      a.o = o.view(), a.lse = lse.stats_view();
      return a;
    }
    BackwardArgs backward_args() const {
      BackwardArgs a;
      a.q = q.view(), a.k = broadcast(k), a.v = broadcast(v);
      a.o = o.view(), a.lse = lse.stats_view(), a.grad_o = grad_o.view();
      a.grad_q = grad_q.view(), a.grad_k = grad_k.view(), a.grad_v = grad_v.view();
      return a;
    }
    TestTensor q, k, v, grad_o, o, grad_q, grad_k, grad_v, lse;
  };
  // Both round the same fp32 arithmetic to bf16: a few bf16 steps apart at most.
  auto expect_close = [](const std::string& name, const TestTensor& a, const TestTensor& b) {
    const std::vector<double> x = a.values(a.download()), y = b.values(b.download());
    ASSERT_EQ(x.size(), y.size());
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, std::abs(x[i] - y[i]) / (0.05 + std::abs(y[i])));
    EXPECT_LT(worst, 0.05) << name << ": GPU and CPU differ by " << worst << " (relative)";
  };
  for (std::int64_t dim : {64, 192, 384}) {
    Side gpu(MemoryKind::cuda, dim), cpu(MemoryKind::host, dim);
    Options on_cpu;
    on_cpu.backend = Backend::cpu;
    for (const std::string& kernel : plan_forward(gpu.forward_args(), gpu_options()).kernels)
      EXPECT_EQ(kernel.find("copy=tma"), std::string::npos) << kernel;
    for (const std::string& kernel : plan_backward(gpu.backward_args(), gpu_options()).kernels)
      EXPECT_EQ(kernel.find("copy=tma"), std::string::npos) << kernel;
    forward(gpu.forward_args(), gpu_options());
    forward(cpu.forward_args(), on_cpu);
    backward(gpu.backward_args(), gpu_options());
    backward(cpu.backward_args(), on_cpu);
    const std::string at = " at D = " + std::to_string(dim);
    expect_close("o" + at, gpu.o, cpu.o);
    expect_close("grad_q" + at, gpu.grad_q, cpu.grad_q);
    expect_close("grad_k" + at, gpu.grad_k, cpu.grad_k);
    expect_close("grad_v" + at, gpu.grad_v, cpu.grad_v);
  }
}

// The fp32 kernels (CUDA cores, fp32 throughout) against the fp32 rule: the
// standard f32 cases and random shapes, forward and backward; the backward is
// the deterministic one whichever variant is asked for.
class GpuFloat32 : public ::testing::TestWithParam<Case> {};

TEST_P(GpuFloat32, ForwardMatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(check_forward(GetParam(), gpu_options()));
}

TEST_P(GpuFloat32, BackwardMatchesReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(check_backward(GetParam(), gpu_options(true)));
  EXPECT_TRUE(check_backward(GetParam(), gpu_options(false)));
}

std::vector<Case> float32_cases() {
  std::vector<Case> cases;
  for (const Case& c : standard_backward_cases())
    if (c.dtype == DType::f32) cases.push_back(c);
  for (Case c : random_cases(8)) {
    c.dtype = DType::f32;
    cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, GpuFloat32, ::testing::ValuesIn(with_masks(float32_cases())), CaseName());

}  // namespace
}  // namespace flashgen::testing
