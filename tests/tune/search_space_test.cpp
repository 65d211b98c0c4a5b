// The tuner's search space and its pruning without a GPU: only valid
// tunings, lopsided shapes included; pruning drops what exceeds shared
// memory, spills or fails to compile, keeps the `top` best estimates and the
// default, and stops compiling once it has them.
#include "tune/search_space.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "codegen/generate.hpp"
#include "codegen/heuristics.hpp"
#include "tune/cost_model.hpp"

namespace flashgen {
namespace {

constexpr std::size_t kHopperShared = 232448;

KernelSpec spec(KernelKind kind, int dim_qk, int dim_v = 0) {
  KernelSpec s;
  s.kind = kind;
  s.dtype = DType::bf16;
  s.dim_qk = dim_qk;
  s.dim_v = dim_v > 0 ? dim_v : dim_qk;
  s.arch = "sm_90a";
  return s;
}

const KernelKind kTunedKinds[] = {KernelKind::forward, KernelKind::backward_query,
                                  KernelKind::backward_key_value, KernelKind::backward_atomic};

bool contains(const std::vector<TuningParams>& space, int rows, int cols) {
  return std::any_of(space.begin(), space.end(), [&](const TuningParams& t) {
    return t.block_rows == rows && t.block_cols == cols;
  });
}

TEST(SearchSpace, HasLopsidedShapes) {
  for (KernelKind kind : kTunedKinds) {
    const std::vector<TuningParams> space = search_space(spec(kind, 64));
    EXPECT_TRUE(contains(space, 64, 128)) << to_string(kind);
    EXPECT_TRUE(contains(space, 128, 32)) << to_string(kind);
    EXPECT_TRUE(contains(space, 32, 128)) << to_string(kind);
    EXPECT_TRUE(contains(space, 128, 16)) << to_string(kind);
  }
}

TEST(SearchSpace, OnlyValidTunings) {
  for (KernelKind kind : kTunedKinds)
    for (int dim : {1, 16, 40, 64, 127, 128, 200, 256, 257, 512}) {
      const KernelSpec s = spec(kind, dim);
      const std::vector<TuningParams> space = search_space(s);
      ASSERT_FALSE(space.empty());
      std::set<std::string> seen;
      for (const TuningParams& t : space) {
        const std::string name = s.to_string() + " | " + t.to_string();
        EXPECT_NO_THROW(generate(s, t)) << name;
        EXPECT_TRUE(t.row_tiles() == 1 || t.row_tiles() == 2) << name;
        EXPECT_TRUE(seen.insert(t.to_string()).second) << "twice: " << name;
        // A head block only where it splits the output dim.
        if (t.head_block != 0) EXPECT_GT(head_chunks_of(s, t), 1) << name;
        // The forward caches Q at Dqk <= 128; with split=dims the key/value
        // backward K and V, the query backward Q and dO; nothing else caches.
        if (t.cached != 0 && kind == KernelKind::backward_key_value) {
          EXPECT_EQ(t.split, WarpgroupSplit::dims) << name;
          EXPECT_EQ(t.cached & ~unsigned(kCacheK | kCacheV), 0u) << name;
        } else if (t.cached != 0 && kind == KernelKind::backward_query) {
          EXPECT_EQ(t.split, WarpgroupSplit::dims) << name;
          EXPECT_EQ(t.cached & ~unsigned(kCacheQ | kCacheGradO), 0u) << name;
        } else if (t.cached != 0) {
          EXPECT_EQ(kind, KernelKind::forward) << name;
          EXPECT_EQ(t.cached, unsigned(kCacheQ)) << name;
          EXPECT_LE(dim, 128) << name;
        }
      }
    }
}

TEST(SearchSpace, HeadBlocksFollowTheSplitDim) {
  // The forward splits Dv, the query backward Dqk.
  auto heads = [](const KernelSpec& s) {
    std::set<int> h;
    for (const TuningParams& t : search_space(s)) h.insert(t.head_block);
    return h;
  };
  EXPECT_EQ(heads(spec(KernelKind::forward, 64, 512)), (std::set<int>{0, 64, 128, 256}));
  EXPECT_EQ(heads(spec(KernelKind::forward, 512, 64)), (std::set<int>{0}));
  EXPECT_EQ(heads(spec(KernelKind::backward_query, 512, 64)), (std::set<int>{0, 64, 128, 256}));
  EXPECT_EQ(heads(spec(KernelKind::backward_key_value, 200, 64)), (std::set<int>{0, 64, 128}));
}

TEST(SearchSpace, WgmmaKernelsWhereTheyApply) {
  auto wgmma_heads = [](const KernelSpec& s) {
    std::set<int> h;
    for (const TuningParams& t : search_space(s))
      if (t.wgmma) h.insert(t.head_block);
    return h;
  };
  EXPECT_EQ(wgmma_heads(spec(KernelKind::forward, 128)), (std::set<int>{0}));
  EXPECT_EQ(wgmma_heads(spec(KernelKind::forward, 512)), (std::set<int>{256}));
  EXPECT_EQ(wgmma_heads(spec(KernelKind::backward_query, 256)), (std::set<int>{0}));
  EXPECT_EQ(wgmma_heads(spec(KernelKind::backward_query, 257)), (std::set<int>{0}))
      << "two warpgroups splitting the head dims";
  KernelSpec unaligned_query = spec(KernelKind::backward_query, 300);
  unaligned_query.vec = 4;
  EXPECT_EQ(wgmma_heads(unaligned_query), (std::set<int>{0})) << "split=dims through token rows";
  EXPECT_EQ(wgmma_heads(spec(KernelKind::backward_key_value, 128)), (std::set<int>{0}));
  EXPECT_EQ(wgmma_heads(spec(KernelKind::backward_key_value, 144)), (std::set<int>{0}))
      << "two warpgroups splitting dK and dV";
  EXPECT_EQ(wgmma_heads(spec(KernelKind::backward_key_value, 257)), (std::set<int>{0}))
      << "a dV and a dK CTA, two warpgroups splitting the head dims";
  KernelSpec unaligned_key_value = spec(KernelKind::backward_key_value, 300);
  unaligned_key_value.vec = 4;
  EXPECT_EQ(wgmma_heads(unaligned_key_value), (std::set<int>{0}))
      << "split=dims through token rows";
  KernelSpec unaligned = spec(KernelKind::backward_key_value, 140);
  unaligned.vec = 4;
  EXPECT_EQ(wgmma_heads(unaligned), (std::set<int>{0})) << "split=outputs through token rows";
  unaligned.vec = 0;
  EXPECT_EQ(wgmma_heads(unaligned), (std::set<int>{})) << "split=outputs copies by TMA only";
  EXPECT_EQ(wgmma_heads(spec(KernelKind::backward_atomic, 64)), (std::set<int>{}));
  KernelSpec odd = spec(KernelKind::backward_key_value, 63);
  odd.vec = 1;
  EXPECT_EQ(wgmma_heads(odd), (std::set<int>{0})) << "the key/value backward stages 2-byte rows";
  odd.kind = KernelKind::backward_query;
  EXPECT_EQ(wgmma_heads(odd), (std::set<int>{0})) << "the query backward stages 2-byte rows";
  odd.kind = KernelKind::forward;
  EXPECT_EQ(wgmma_heads(odd), (std::set<int>{0})) << "the forward stages 2-byte rows";
  KernelSpec ampere = spec(KernelKind::forward, 64);
  ampere.arch = "sm_80";
  EXPECT_EQ(wgmma_heads(ampere), (std::set<int>{}));
}

// A compile function for tests: resources from a rule, calls counted.
struct FakeCompiler {
  std::function<cuda::KernelResources(const TuningParams&)> rule;
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  CompileFunction function() const {
    return [rule = rule, calls = calls](const KernelSpec&, const GeneratedKernel& g) {
      ++*calls;
      // The tuning is the part of the name after " | ".
      return rule(parse_tuning(g.name.substr(g.name.find(" | ") + 3)));
    };
  }
};

cuda::KernelResources clean() {
  cuda::KernelResources r;
  r.registers = 128;
  return r;
}

PruneSettings settings(int top, CompileFunction compile, std::size_t limit = kHopperShared) {
  PruneSettings s;
  s.shared_limit = limit;
  s.top = top;
  s.threads = 2;
  s.compile = std::move(compile);
  return s;
}

int defaults_in(const PruneResult& r) {
  return static_cast<int>(
      std::count_if(r.kept.begin(), r.kept.end(), [](const Candidate& c) { return c.is_default; }));
}

TEST(Prune, DropsOverLimitSharedMemory) {
  const KernelSpec s = spec(KernelKind::forward, 256);
  constexpr std::size_t kSmallLimit = 65536;
  const TuningParams fallback = default_tuning(s, kSmallLimit);
  FakeCompiler compiler{[](const TuningParams&) { return clean(); }};
  const PruneResult r = prune(s, fallback, settings(1000, compiler.function(), kSmallLimit));
  int over = 0;
  for (const Rejected& x : r.rejected)
    if (x.reason.rfind("shared memory", 0) == 0) {
      ++over;
      EXPECT_GT(shared_bytes(s, x.tuning), kSmallLimit) << x.tuning.to_string();
    }
  EXPECT_GT(over, 0);
  for (const Candidate& c : r.kept) {
    if (c.is_default) continue;
    EXPECT_LE(c.shared_bytes, kSmallLimit) << c.tuning.to_string();
    EXPECT_EQ(c.shared_bytes, shared_bytes(s, c.tuning));
  }
  // Every tuning is accounted for: kept or rejected, the default once.
  const std::vector<TuningParams> space = search_space(s);
  const bool default_in_space = std::find(space.begin(), space.end(), fallback) != space.end();
  EXPECT_EQ(r.kept.size() + r.rejected.size(), space.size() + (default_in_space ? 0 : 1));
}

TEST(Prune, DropsSpillsStackFramesAndCompileErrorsButKeepsTheDefault) {
  const KernelSpec s = spec(KernelKind::backward_key_value, 128);
  const TuningParams fallback = default_tuning(s, kHopperShared);
  FakeCompiler compiler{[fallback](const TuningParams& t) -> cuda::KernelResources {
    cuda::KernelResources r = clean();
    if (t == fallback || t.block_cols == 128) r.spill_store_bytes = r.spill_load_bytes = 16;
    if (t.block_cols == 32) r.stack_frame_bytes = 8;
    if (t.block_rows == 32 && t.block_cols == 16 && t.head_block == 0)
      throw Error(ErrorCode::runtime, "NVRTC: static assertion failed\nmore");
    return r;
  }};
  const PruneResult r = prune(s, fallback, settings(1000, compiler.function()));
  EXPECT_EQ(defaults_in(r), 1);
  for (const Candidate& c : r.kept) {
    if (c.is_default) {
      EXPECT_EQ(c.tuning, fallback);
      continue;
    }
    EXPECT_NE(c.tuning.block_cols, 128) << c.tuning.to_string();
    EXPECT_NE(c.tuning.block_cols, 32) << c.tuning.to_string();
    EXPECT_FALSE(c.tuning.block_rows == 32 && c.tuning.block_cols == 16 &&
                 c.tuning.head_block == 0);
  }
  int spills = 0, errors = 0;
  for (const Rejected& x : r.rejected) {
    if (x.reason.rfind("spills", 0) == 0) ++spills;
    if (x.reason == "compile error: NVRTC: static assertion failed") ++errors;
  }
  EXPECT_GT(spills, 0);
  EXPECT_EQ(errors, 1);
}

TEST(Prune, KeepsTheTopEstimatesAndStopsCompiling) {
  const KernelSpec s = spec(KernelKind::forward, 64);
  const TuningParams fallback = default_tuning(s, kHopperShared);
  PruneSettings base = settings(3, {});
  // Every candidate with cols = 64 spills: the top 3 are the best estimates
  // of the others.
  FakeCompiler compiler{[](const TuningParams& t) {
    cuda::KernelResources r = clean();
    if (t.block_cols == 64) r.spill_store_bytes = 4;
    return r;
  }};
  base.compile = compiler.function();
  const PruneResult r = prune(s, fallback, base);
  ASSERT_EQ(r.kept.size(), 4u);
  EXPECT_EQ(defaults_in(r), 1);
  std::vector<double> expected;
  for (const TuningParams& t : search_space(s))
    if (!(t == fallback) && t.block_cols != 64 && shared_bytes(s, t) <= kHopperShared)
      expected.push_back(estimated_cycles(s, t, base.problem, base.device));
  std::sort(expected.begin(), expected.end());
  std::vector<double> kept;
  for (const Candidate& c : r.kept)
    if (!c.is_default) kept.push_back(c.estimated_cycles);
  std::sort(kept.begin(), kept.end());
  ASSERT_GE(expected.size(), 3u);
  EXPECT_EQ(kept, std::vector<double>(expected.begin(), expected.begin() + 3));
  // Not the whole space was compiled.
  EXPECT_EQ(compiler.calls->load(), r.compiled);
  EXPECT_LT(r.compiled, r.space);
  // Kept in order of the estimate.
  EXPECT_TRUE(
      std::is_sorted(r.kept.begin(), r.kept.end(), [](const Candidate& a, const Candidate& b) {
        return a.estimated_cycles < b.estimated_cycles;
      }));
}

TEST(Prune, WithNvrtcKeptCandidatesDoNotSpill) {
  try {
    cuda::nvrtc_version();
  } catch (const Error& e) {
    GTEST_SKIP() << "NVRTC not available: " << e.what();
  }
  // Few compiles: the default and the two best estimates that do not spill.
  const KernelSpec s = spec(KernelKind::forward, 128);
  const TuningParams fallback = default_tuning(s, kHopperShared);
  const PruneResult r = prune(s, fallback, settings(2, compile_without_device()));
  EXPECT_EQ(defaults_in(r), 1);
  EXPECT_EQ(r.kept.size(), 3u);
  for (const Candidate& c : r.kept) {
    EXPECT_GT(c.resources.registers, 0) << c.tuning.to_string();
    if (c.is_default) continue;
    EXPECT_EQ(c.resources.spill_store_bytes, 0) << c.tuning.to_string();
    EXPECT_EQ(c.resources.spill_load_bytes, 0) << c.tuning.to_string();
    EXPECT_EQ(c.resources.stack_frame_bytes, 0) << c.tuning.to_string();
  }
  for (const Rejected& x : r.rejected)
    EXPECT_EQ(x.reason.rfind("compile error", 0), std::string::npos) << x.reason;
}

TEST(CostModel, CountsWorkTheWayTheKernelsDo) {
  const KernelSpec s = spec(KernelKind::forward, 128);
  const TuningParams t{128, 64, 0, 4, 0};
  const CostProblem full;
  CostProblem half = full;
  half.batch = 1;
  const CostDevice device;
  const double cycles = estimated_cycles(s, t, full, device);
  EXPECT_GT(cycles, 0);
  // Half the CTAs take about half the time (whole waves either way).
  EXPECT_NEAR(estimated_cycles(s, t, half, device) / cycles, 0.5, 0.05);
  // Causal skips about half the blocks.
  KernelSpec causal = s;
  causal.causal = true;
  EXPECT_NEAR(estimated_cycles(causal, t, full, device) / cycles, 0.5, 0.1);
  // Splitting the value dim recomputes scores: more work.
  KernelSpec wide = spec(KernelKind::forward, 128, 256);
  EXPECT_GT(estimated_cycles(wide, {64, 32, 128, 4, 0}, full, device),
            estimated_cycles(wide, {64, 32, 0, 4, 0}, full, device));
  // Accumulators past the register file (two row tiles of 128 x 128 scores
  // and O) will spill: ranked behind a shape that fits.
  EXPECT_EQ(estimated_registers(s, {128, 128, 0, 4, 0}), 255);
  EXPECT_GT(estimated_cycles(s, {128, 128, 0, 4, 0}, full, device),
            2 * estimated_cycles(s, {128, 64, 0, 8, 0}, full, device));
}

// The key/value kernel splitting the head dims: operands held in registers
// read less shared memory, and a third stage hides the copies.
TEST(CostModel, RanksHeldOperandsAndDeeperPipelinesAhead) {
  const KernelSpec s = spec(KernelKind::backward_key_value, 384);
  const CostProblem problem;
  const CostDevice device;
  auto cycles = [&](unsigned cached, int stages) {
    TuningParams t = with_tma_producer(TuningParams{64, 32, 0, 8, cached, true}, stages);
    t.split = WarpgroupSplit::dims;
    return estimated_cycles(s, t, problem, device);
  };
  EXPECT_LT(cycles(kCacheK | kCacheV, 3), cycles(kCacheV, 3));
  EXPECT_LT(cycles(kCacheV, 3), cycles(0, 3));
  EXPECT_LT(cycles(0, 3), cycles(0, 2));
}

TEST(SearchSpace, ProducersCopyByTmaWhereTheyMayByCpAsyncElsewhere) {
  for (KernelKind kind :
       {KernelKind::forward, KernelKind::backward_query, KernelKind::backward_key_value}) {
    KernelSpec s = spec(kind, 128);
    ASSERT_EQ(s.vec, 8);
    int with_tma = 0, without = 0;
    for (const TuningParams& t : search_space(s)) {
      if (!t.wgmma) continue;
      EXPECT_EQ(t.tma, t.producer) << t.to_string();
      // One computing warpgroup takes no producer (check_tuning).
      if (t.warps < 8) EXPECT_FALSE(t.producer) << t.to_string();
      if (t.warps < 8) continue;
      (t.tma ? with_tma : without) += 1;
    }
    EXPECT_GT(with_tma, 0) << to_string(kind);
    // Every wgmma shape of two or more warpgroups both ways; the forward's
    // with TMA three and two stages deep.
    EXPECT_EQ(with_tma, (kind == KernelKind::forward ? 2 : 1) * without) << to_string(kind);
    // 8-byte rows: every such shape also with the cp.async producer (the
    // forward's also four stages deep), and with TMA (token-row views) as
    // on 16-byte rows.
    const bool forward = kind == KernelKind::forward;
    s.vec = 4;
    int copying = 0, plain = 0, token_rows = 0;
    for (const TuningParams& t : search_space(s))
      if (t.wgmma && t.split == WarpgroupSplit::rows && t.warps >= 8)
        (t.tma ? token_rows : t.producer ? copying : plain) += 1;
    EXPECT_EQ(copying, (forward ? 2 : 1) * plain) << to_string(kind);
    EXPECT_EQ(token_rows, (forward ? 2 : 1) * plain) << to_string(kind);
    s.vec = 1;  // 2-byte rows: staged, no producer but the TMA one
    for (const TuningParams& t : search_space(s))
      EXPECT_TRUE(!t.producer || t.tma) << t.to_string();
  }
}

TEST(PipelineVariants, TheSameShapeCopiedEachWay) {
  TuningParams base{192, 64, 0, 12, 0};
  base.wgmma = true;
  const KernelSpec forward = spec(KernelKind::forward, 128);
  const std::vector<TuningParams> v = pipeline_variants(forward, base, kHopperShared);
  ASSERT_EQ(v.size(), 7u);
  EXPECT_EQ(v[0], base);
  // TMA into swizzled tiles, then as 8-column slices, at each depth.
  const std::string tma = " producer=warp copy=tma";
  EXPECT_EQ(v[1].to_string(), base.to_string() + tma + " swizzle=32");
  EXPECT_EQ(v[2].to_string(), base.to_string() + tma);
  EXPECT_EQ(v[3].to_string(), base.to_string() + " stages=2" + tma + " swizzle=32");
  EXPECT_EQ(v[4].to_string(), base.to_string() + " stages=2" + tma);
  EXPECT_EQ(v[5].to_string(), base.to_string() + " stages=4" + tma + " swizzle=32");
  EXPECT_EQ(v[6].to_string(), base.to_string() + " stages=4" + tma);
  // From a TMA tuning: itself first, then without the producer.
  const std::vector<TuningParams> from_tma = pipeline_variants(forward, v[1], kHopperShared);
  ASSERT_EQ(from_tma.size(), 7u);
  EXPECT_EQ(from_tma[0], v[1]);
  EXPECT_EQ(from_tma[1], base);
  // The backward kernels have no stages to choose.
  EXPECT_EQ(pipeline_variants(spec(KernelKind::backward_query, 128), base, kHopperShared).size(),
            3u);
  // 8-byte rows: the forward's TMA through token-row views as above, then
  // the producer copying by cp.async (three and four stages deep).
  KernelSpec eight_byte = spec(KernelKind::forward, 76);
  eight_byte.vec = 4;
  const std::vector<TuningParams> copying = pipeline_variants(eight_byte, base, kHopperShared);
  ASSERT_EQ(copying.size(), 9u);
  for (std::size_t i = 1; i < 7; ++i) EXPECT_EQ(copying[i], v[i]);
  EXPECT_EQ(copying[7].to_string(), base.to_string() + " producer=warp");
  EXPECT_EQ(copying[8].to_string(), base.to_string() + " stages=4 producer=warp");
  // The atomic backward on 8-byte rows: no TMA.
  KernelSpec eight_byte_atomic = spec(KernelKind::backward_atomic, 76);
  eight_byte_atomic.vec = 4;
  for (const TuningParams& t : pipeline_variants(eight_byte_atomic, base, kHopperShared))
    EXPECT_FALSE(t.tma) << t.to_string();
  // Rows only 2-byte aligned: no cp.async producer, the forward's TMA one;
  // mma.sync tunings: only themselves.
  KernelSpec odd = spec(KernelKind::forward, 127);
  odd.vec = 1;
  for (const TuningParams& t : pipeline_variants(odd, base, kHopperShared))
    EXPECT_TRUE(!t.producer || t.tma) << t.to_string();
  const TuningParams sync{128, 64, 0, 4, 0};
  EXPECT_EQ(pipeline_variants(forward, sync, kHopperShared), std::vector<TuningParams>{sync});
  // Over the shared-memory limit: left out (four stages of 64 x 128 K and V).
  EXPECT_EQ(pipeline_variants(forward, base, shared_bytes(forward, v[1])).size(), 5u);
}

TEST(Prune, TopZeroCompilesOnlyTheDefaultAndTheKept) {
  const KernelSpec s = spec(KernelKind::forward, 128);
  const TuningParams fallback = default_tuning(s, kHopperShared);
  TuningParams base{192, 64, 0, 12, 0};
  base.wgmma = true;
  FakeCompiler compiler{[](const TuningParams&) { return clean(); }};
  PruneSettings ps = settings(0, compiler.function());
  ps.keep = pipeline_variants(s, base, kHopperShared);
  const PruneResult r = prune(s, fallback, ps);
  std::size_t expected = ps.keep.size() + 1;
  for (const TuningParams& k : ps.keep)
    if (k == fallback) --expected;
  EXPECT_EQ(r.kept.size(), expected);
  EXPECT_EQ(compiler.calls->load(), static_cast<int>(expected));
}

}  // namespace
}  // namespace flashgen
