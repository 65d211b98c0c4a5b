// The tuner's decisions with a fake runner (no GPU): the fastest correct
// candidate wins, a wrong one is dropped and reported, the default stays
// unless beaten by more than kMinimumGain, the two backward kernels are
// tuned one after the other with the other one pinned.
#include "tune/tuner.hpp"

#include <gtest/gtest.h>

#include <map>

#include "codegen/heuristics.hpp"
#include "tune/tuning_table.hpp"
#include "tune_test_util.hpp"

namespace flashgen {
namespace {

using tune_test::ScopedEnv;

Problem problem_of(int dim) {
  Problem p;
  p.batch = 2;
  p.heads_q = p.heads_kv = 16;
  p.seq_q = p.seq_kv = 8192;
  p.dim_qk = p.dim_v = dim;
  p.dtype = DType::bf16;
  p.scale = 0.125;
  return p;
}

KernelSpec spec_of(const Problem& p, KernelKind kind) {
  KernelSpec s;
  s.kind = kind;
  s.dtype = p.dtype;
  s.dim_qk = static_cast<int>(p.dim_qk);
  s.dim_v = static_cast<int>(p.dim_v);
  s.causal = p.causal;
  s.arch = "sm_90a";
  return s;
}

// Times and verdicts from rules on the tuning the overrides force.
class FakeRunner : public CandidateRunner {
 public:
  explicit FakeRunner(const Problem& p) : problem_(p) {}

  std::function<double(KernelKind, const TuningParams&)> ms;
  std::function<bool(KernelKind, const TuningParams&)> wrong = [](KernelKind, const TuningParams&) {
    return false;
  };
  int prepared = 0;
  int checks = 0;
  int walked = 0;  // timings and checks of forward tunings that walk their tiles
  int turned = 0;  // ... whose warpgroups take turns (pingpong=1)
  // Tunings of the other backward kernel seen while a backward kind was timed.
  std::vector<TuningParams> key_value_while_query, query_while_key_value;

  void prepare_backward() override { ++prepared; }
  std::string check(KernelKind kind) override {
    ++checks;
    return wrong(kind, forced(kind)) ? "dQ max|out-ref| 1e+00 > bound 1e-02" : "";
  }
  Measurement time(KernelKind kind, double) override {
    record_pins(kind);
    return {ms(kind, forced(kind)), false};
  }
  double time_full(KernelKind kind) override {
    record_pins(kind);
    return ms(kind, forced(kind));
  }

 private:
  // The tuning the rules here are about: a table row's. The tuner forces
  // what a call runs for it (the forward's tile walk and its warpgroups'
  // turns added where they apply), which is counted and taken off.
  TuningParams forced(KernelKind kind) {
    std::optional<TuningParams> t = lookup_tuning(spec_of(problem_, kind), problem_);
    EXPECT_TRUE(t) << "no override for " << to_string(kind);
    if (t && t->persistent) {
      ++walked;
      t->persistent = false;
    }
    if (t && t->pingpong) {
      ++turned;
      t->pingpong = false;
    }
    return t.value_or(TuningParams{});
  }
  void record_pins(KernelKind kind) {
    if (kind == KernelKind::backward_query)
      key_value_while_query.push_back(forced(KernelKind::backward_key_value));
    if (kind == KernelKind::backward_key_value)
      query_while_key_value.push_back(forced(KernelKind::backward_query));
  }
  Problem problem_;
};

// Every candidate survives the (fake) compile; no table interferes.
class TunerTest : public ::testing::Test {
 protected:
  TunerTest()
      : tuning_("FLASHGEN_TUNING", std::nullopt),
        tables_("FLASHGEN_TUNING_TABLES", std::string("off")) {
    reload_tuning_tables();
    settings_.top = 1000;
    settings_.compile_threads = 2;
    settings_.compile = [](const KernelSpec&, const GeneratedKernel&) {
      cuda::KernelResources r;
      r.registers = 128;
      return r;
    };
  }
  ~TunerTest() override { reload_tuning_tables(); }

  TuningParams default_for(const Problem& p, KernelKind kind) const {
    return default_tuning(spec_of(p, kind), settings_.shared_limit);
  }

  ScopedEnv tuning_, tables_;
  TunerSettings settings_;
};

const TuningParams kFast{128, 128, 0, 8, kCacheQ};
const TuningParams kFaster{128, 128, 0, 8, 0};

TEST_F(TunerTest, FastestCorrectCandidateWinsAndWrongOnesAreReported) {
  const Problem p = problem_of(64);
  const TuningParams fallback = default_for(p, KernelKind::forward);
  ASSERT_FALSE(fallback == kFast);
  FakeRunner runner(p);
  runner.ms = [&](KernelKind, const TuningParams& t) {
    if (t == fallback) return 10.0;
    if (t == kFast) return 8.0;
    if (t == kFaster) return 5.0;  // but wrong
    return 12.0;
  };
  runner.wrong = [](KernelKind, const TuningParams& t) { return t == kFaster; };
  settings_.kinds = {KernelKind::forward};
  const std::vector<KindResult> results = tune_configuration(p, 8, runner, settings_);
  ASSERT_EQ(results.size(), 1u);
  const KindResult& r = results[0];
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.default_tuning, fallback);
  EXPECT_EQ(r.best, kFast);
  EXPECT_DOUBLE_EQ(r.best_ms, 8.0);
  EXPECT_DOUBLE_EQ(r.default_ms, 10.0);
  EXPECT_EQ(r.spec.vec, 8);
  int wrong = 0;
  for (const CandidateOutcome& o : r.outcomes)
    if (o.tuning == kFaster) {
      EXPECT_EQ(o.rejected, "wrong results: dQ max|out-ref| 1e+00 > bound 1e-02");
      EXPECT_LT(o.ms, 0);
      ++wrong;
    }
  EXPECT_EQ(wrong, 1);
  // The default is timed first (the baseline of the cut-off).
  EXPECT_TRUE(r.outcomes.front().is_default);
  EXPECT_EQ(runner.checks, static_cast<int>(r.outcomes.size()));
  EXPECT_EQ(runner.prepared, 0);  // no backward kind
  EXPECT_EQ(runner.walked, 0) << "8192 keys per query block: the grid";
}

// A short problem's forward rows are timed walking their tiles, as a call
// runs them (walking_where_faster).
TEST_F(TunerTest, ShortProblemsAreTimedWalkingTheirTiles) {
  Problem p = problem_of(64);
  p.seq_q = p.seq_kv = 256;
  FakeRunner runner(p);
  runner.ms = [](KernelKind, const TuningParams& t) { return t.block_cols / 16.0; };
  settings_.kinds = {KernelKind::forward};
  const std::vector<KindResult> results = tune_configuration(p, 8, runner, settings_);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].ok()) << results[0].error;
  EXPECT_GT(runner.walked, 0);
  EXPECT_FALSE(results[0].best.persistent) << "rows hold the tuning, the walk is added when run";
}

TEST_F(TunerTest, DefaultStaysUnlessBeatenByTheMinimumGain) {
  const Problem p = problem_of(128);
  const TuningParams fallback = default_for(p, KernelKind::forward);
  FakeRunner runner(p);
  const double kDefaultMs = 10.0;
  // The best other candidate is faster, but by less than kMinimumGain.
  runner.ms = [&](KernelKind, const TuningParams& t) {
    if (t == fallback) return kDefaultMs;
    if (t == kFaster) return kDefaultMs * (1 - kMinimumGain / 2);
    return 2 * kDefaultMs;
  };
  settings_.kinds = {KernelKind::forward};
  const KindResult r = tune_configuration(p, 8, runner, settings_)[0];
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.best, fallback);
  EXPECT_DOUBLE_EQ(r.best_ms, r.default_ms);
}

// A bf16 forward row at D = dim for N = 4097..8192.
TuningRow forward_row(int dim, const TuningParams& tuning) {
  TuningRow row;
  row.kind = KernelKind::forward;
  row.dtype = DType::bf16;
  row.dim_qk_min = row.dim_qk_max = row.dim_v_min = row.dim_v_max = dim;
  row.seq_min = 4097;
  row.seq_max = 8192;
  row.tuning = tuning;
  return row;
}

TEST_F(TunerTest, TheStartingTablesChoiceIsTimedWhateverItsRank) {
  // With one candidate besides the default, a tuning the cost model ranks
  // low is still timed when the table being extended chose it (here by its
  // nearest row, D = 224 for D = 199), and wins when faster.
  const Problem p = problem_of(199);
  const TuningParams fallback = default_for(p, KernelKind::forward);
  TuningParams chosen{192, 32, 0, 12, 0};
  chosen.wgmma = true;
  ASSERT_FALSE(chosen == fallback);
  settings_.starting_rows = {forward_row(224, chosen)};
  settings_.top = 1;
  FakeRunner runner(p);
  runner.ms = [&](KernelKind, const TuningParams& t) { return t == chosen ? 5.0 : 10.0; };
  settings_.kinds = {KernelKind::forward};
  const KindResult r = tune_configuration(p, 1, runner, settings_)[0];
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.best, chosen);
  EXPECT_EQ(r.outcomes.size(), 3u) << "the default, the table's choice and the top candidate";
  EXPECT_EQ(table_choice(settings_.starting_rows, spec_of(p, KernelKind::forward), 8192,
                         settings_.shared_limit),
            chosen);
  EXPECT_FALSE(table_choice({}, spec_of(p, KernelKind::forward), 8192, settings_.shared_limit));
}

TEST_F(TunerTest, PipelinesOnlyTimesTheTablesShapeCopiedEachWay) {
  // No search: the table's tuning, its pipeline variants and the default;
  // the TMA variant wins here.
  const Problem p = problem_of(128);
  TuningParams chosen{192, 64, 0, 12, 0};
  chosen.wgmma = true;
  settings_.starting_rows = {forward_row(128, chosen)};
  settings_.pipelines_only = true;
  settings_.kinds = {KernelKind::forward};
  const KernelSpec spec = spec_of(p, KernelKind::forward);
  const std::vector<TuningParams> variants =
      pipeline_variants(spec, chosen, settings_.shared_limit);
  ASSERT_EQ(tunings_to_keep(settings_, spec, 8192), variants);
  const TuningParams winner = variants[1];
  ASSERT_TRUE(winner.tma);
  FakeRunner runner(p);
  runner.ms = [&](KernelKind, const TuningParams& t) { return t == winner ? 5.0 : 10.0; };
  const KindResult r = tune_configuration(p, 8, runner, settings_)[0];
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.best, winner);
  std::size_t expected = variants.size() + 1;  // and the default, unless among them
  for (const TuningParams& v : variants)
    if (v == r.default_tuning) --expected;
  EXPECT_EQ(r.outcomes.size(), expected);
  // Without a table row: the default's variants.
  settings_.starting_rows.clear();
  EXPECT_EQ(tunings_to_keep(settings_, spec, 8192),
            pipeline_variants(spec, default_for(p, KernelKind::forward), settings_.shared_limit));
}

TEST_F(TunerTest, BackwardKernelsAreTunedOneAfterTheOther) {
  const Problem p = problem_of(64);
  const TuningParams query_default = default_for(p, KernelKind::backward_query);
  const TuningParams key_value_default = default_for(p, KernelKind::backward_key_value);
  const TuningParams query_winner{128, 32, 0, 8, 0};
  ASSERT_FALSE(query_winner == query_default);
  FakeRunner runner(p);
  runner.ms = [&](KernelKind kind, const TuningParams& t) {
    if (kind == KernelKind::backward_query && t == query_winner) return 5.0;
    return 10.0 + t.block_rows / 1000.0;  // the rest: no winner beyond noise
  };
  settings_.kinds = kinds_named({"backward", "forward"});  // listed order does not matter
  ASSERT_EQ(settings_.kinds.size(), 3u);
  EXPECT_EQ(settings_.kinds[0], KernelKind::forward);
  const std::vector<KindResult> results = tune_configuration(p, 8, runner, settings_);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[1].kind, KernelKind::backward_query);
  EXPECT_EQ(results[1].best, query_winner);
  EXPECT_EQ(results[2].kind, KernelKind::backward_key_value);
  EXPECT_EQ(runner.prepared, 1);
  ASSERT_FALSE(runner.key_value_while_query.empty());
  for (const TuningParams& t : runner.key_value_while_query) EXPECT_EQ(t, key_value_default);
  ASSERT_FALSE(runner.query_while_key_value.empty());
  for (const TuningParams& t : runner.query_while_key_value) EXPECT_EQ(t, query_winner);
  // Nothing stays forced after the run.
  EXPECT_FALSE(lookup_tuning(spec_of(p, KernelKind::backward_query), p));
}

TEST_F(TunerTest, WrongDefaultIsAnError) {
  const Problem p = problem_of(64);
  const TuningParams fallback = default_for(p, KernelKind::backward_atomic);
  FakeRunner runner(p);
  runner.ms = [](KernelKind, const TuningParams&) { return 1.0; };
  runner.wrong = [&](KernelKind, const TuningParams& t) { return t == fallback; };
  settings_.kinds = {KernelKind::backward_atomic};
  const KindResult r = tune_configuration(p, 8, runner, settings_)[0];
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("the default tuning " + fallback.to_string() + " cannot be measured"),
            std::string::npos)
      << r.error;
}

TEST_F(TunerTest, ProgressReportsEveryCandidate) {
  const Problem p = problem_of(32);
  FakeRunner runner(p);
  runner.ms = [](KernelKind, const TuningParams& t) { return 1.0 + t.block_cols / 100.0; };
  settings_.kinds = {KernelKind::forward, KernelKind::backward_atomic};
  settings_.top = 3;
  std::map<KernelKind, int> started, done, pruning;
  TunerProgress progress;
  progress.pruning_started = [&](KernelKind kind) { ++pruning[kind]; };
  progress.kind_started = [&](KernelKind kind, int candidates) { started[kind] = candidates; };
  progress.candidate_done = [&](KernelKind kind, const CandidateOutcome&) { ++done[kind]; };
  const std::vector<KindResult> results = tune_configuration(p, 8, runner, settings_, progress);
  for (const KindResult& r : results) {
    EXPECT_EQ(pruning[r.kind], 1);
    EXPECT_EQ(started[r.kind], 4);  // top 3 and the default
    EXPECT_EQ(done[r.kind], static_cast<int>(r.outcomes.size()));
    EXPECT_EQ(r.outcomes.size(), 4u);
  }
}

TEST(KindsNamed, ExpandsBackwardAndRefusesUnknownNames) {
  EXPECT_EQ(kinds_named({"backward_atomic", "forward"}),
            (std::vector<KernelKind>{KernelKind::forward, KernelKind::backward_atomic}));
  EXPECT_EQ(kinds_named({"backward"}),
            (std::vector<KernelKind>{KernelKind::backward_query, KernelKind::backward_key_value}));
  EXPECT_EQ(kinds_named({"backward_key_value"}),
            (std::vector<KernelKind>{KernelKind::backward_key_value}));
  EXPECT_EQ(kinds_named({"backward_key_value", "backward"}),
            (std::vector<KernelKind>{KernelKind::backward_query, KernelKind::backward_key_value}));
  EXPECT_THROW(kinds_named({"sideways"}), Error);
}

}  // namespace
}  // namespace flashgen
