// lookup_tuning: in-process override, then FLASHGEN_TUNING, then the row
// that contains the problem (user table before shipped), then the nearest
// valid row, else nothing (the heuristic default runs).
#include <gtest/gtest.h>

#include "codegen/generate.hpp"
#include "tune/tuning_table.hpp"
#include "tune_test_util.hpp"

namespace flashgen {
namespace {

using tune_test::ScopedEnv;
using tune_test::TempDir;

constexpr std::size_t kHopperShared = 232448;

TuningRow row(KernelKind kind, int dim_lo, int dim_hi, TuningParams tuning,
              std::int64_t seq_min = 1, std::int64_t seq_max = 0) {
  TuningRow r;
  r.kind = kind;
  r.dtype = DType::bf16;
  r.dim_qk_min = r.dim_v_min = dim_lo;
  r.dim_qk_max = r.dim_v_max = dim_hi;
  r.seq_min = seq_min;
  r.seq_max = seq_max;
  r.tuning = tuning;
  r.tflops = 100;
  r.date = "2026-12-03";
  r.driver = "13.0";
  r.gpu = "test";
  return r;
}

KernelSpec spec(KernelKind kind, int dim, bool causal = false) {
  KernelSpec s;
  s.kind = kind;
  s.dtype = DType::bf16;
  s.dim_qk = s.dim_v = dim;
  s.causal = causal;
  s.arch = "sm_90a";
  return s;
}

Problem problem(std::int64_t seq, int dim) {
  Problem p;
  p.batch = 1;
  p.heads_q = p.heads_kv = 1;
  p.seq_q = p.seq_kv = seq;
  p.dim_qk = p.dim_v = dim;
  p.scale = 0.125;
  return p;
}

const TuningParams kA{128, 64, 0, 4, kCacheQ};
const TuningParams kB{64, 128, 0, 4, 0};
const TuningParams kC{128, 32, 0, 8, 0};
const TuningParams kD{64, 32, 0, 2, 0};

TEST(FindRow, ExactRowWins) {
  const TuningTableSet set = make_table_set(
      {row(KernelKind::forward, 64, 64, kA), row(KernelKind::forward, 128, 128, kB)}, {});
  const auto m = find_row(set, spec(KernelKind::forward, 128), 8192, kHopperShared);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->exact);
  EXPECT_EQ(m->row.tuning, kB);
}

TEST(FindRow, OtherKindOrCausalNeverMatch) {
  TuningRow causal = row(KernelKind::forward, 64, 64, kA);
  causal.causal = true;
  const TuningTableSet set =
      make_table_set({causal, row(KernelKind::backward_query, 64, 64, kB)}, {});
  EXPECT_FALSE(find_row(set, spec(KernelKind::forward, 64), 8192, kHopperShared));
}

// The 16-bit dtypes share rows, a row of the call's own dtype first at equal
// distance (a user's f16 row before the shipped bf16 one, and a shipped bf16
// row before a user's f16 one for a bf16 call); fp32 takes neither.
TEST(FindRow, SixteenBitDtypesShareRowsTheirOwnFirst) {
  KernelSpec f16_spec = spec(KernelKind::forward, 64);
  f16_spec.dtype = DType::f16;
  const TuningTableSet shipped = make_table_set({row(KernelKind::forward, 64, 64, kA)}, {});
  const auto m = find_row(shipped, f16_spec, 8192, kHopperShared);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->row.tuning, kA);
  TuningRow f16 = row(KernelKind::forward, 64, 64, kB);
  f16.dtype = DType::f16;
  const TuningTableSet both = make_table_set({row(KernelKind::forward, 64, 64, kA)}, {f16});
  EXPECT_EQ(find_row(both, f16_spec, 8192, kHopperShared)->row.tuning, kB);
  EXPECT_EQ(find_row(both, spec(KernelKind::forward, 64), 8192, kHopperShared)->row.tuning, kA);
  KernelSpec f32_spec = spec(KernelKind::forward, 64);
  f32_spec.dtype = DType::f32;
  EXPECT_FALSE(find_row(shipped, f32_spec, 8192, kHopperShared));
}

TEST(FindRow, NearestPrefersRowsAtOrAboveTheDims) {
  // D = 72 lies between rows at 64 and 128; the 64 row is nearer, but a
  // tuning that fits D = 128 is the one known to fit D = 72's registers.
  const TuningTableSet set = make_table_set(
      {row(KernelKind::forward, 64, 64, kA), row(KernelKind::forward, 128, 128, kB)}, {});
  const auto m = find_row(set, spec(KernelKind::forward, 72), 8192, kHopperShared);
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->exact);
  EXPECT_EQ(m->row.tuning, kB);
  // Past the largest row, the nearest below.
  const TuningTableSet below = make_table_set(
      {row(KernelKind::forward, 32, 32, kD), row(KernelKind::forward, 64, 64, kA)}, {});
  const auto n = find_row(below, spec(KernelKind::forward, 80), 8192, kHopperShared);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->row.tuning, kA);
}

TEST(FindRow, NearestAboveIsTheClosest) {
  const TuningTableSet set =
      make_table_set({row(KernelKind::forward, 256, 256, kC), row(KernelKind::forward, 96, 96, kD),
                      row(KernelKind::forward, 128, 128, kB)},
                     {});
  const auto m = find_row(set, spec(KernelKind::forward, 80), 8192, kHopperShared);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->row.tuning, kD);
}

TEST(FindRow, SequenceBucketsPickTheNearestLength) {
  const TuningTableSet set = make_table_set({row(KernelKind::forward, 64, 64, kA, 1, 1024),
                                             row(KernelKind::forward, 64, 64, kB, 4097, 8192)},
                                            {});
  EXPECT_EQ(find_row(set, spec(KernelKind::forward, 64), 512, kHopperShared)->row.tuning, kA);
  EXPECT_EQ(find_row(set, spec(KernelKind::forward, 64), 8192, kHopperShared)->row.tuning, kB);
  const auto far = find_row(set, spec(KernelKind::forward, 64), 65536, kHopperShared);
  EXPECT_FALSE(far->exact);
  EXPECT_EQ(far->row.tuning, kB);
  // 3000 is 1.55 octaves above 1024 and 0.45 below 4097.
  EXPECT_EQ(find_row(set, spec(KernelKind::forward, 64), 3000, kHopperShared)->row.tuning, kB);
  // Dims outweigh lengths: a row of the right D at another length beats a
  // row of another D at the right length.
  const TuningTableSet dims = make_table_set(
      {row(KernelKind::forward, 64, 64, kA, 1, 1024), row(KernelKind::forward, 128, 128, kB)}, {});
  EXPECT_EQ(find_row(dims, spec(KernelKind::forward, 64), 8192, kHopperShared)->row.tuning, kA);
}

TEST(FindRow, NarrowerExactRowWins) {
  const TuningTableSet set = make_table_set(
      {row(KernelKind::forward, 1, 512, kC), row(KernelKind::forward, 64, 128, kB)}, {});
  EXPECT_EQ(find_row(set, spec(KernelKind::forward, 100), 8192, kHopperShared)->row.tuning, kB);
  EXPECT_EQ(find_row(set, spec(KernelKind::forward, 200), 8192, kHopperShared)->row.tuning, kC);
}

TEST(FindRow, InvalidTuningIsSkipped) {
  // rows=128 cols=128 at D = 512 needs 128·520·2·2 + 128·264·2 bytes > 227 KiB;
  // the next row down that fits is used.
  const TuningRow big = row(KernelKind::forward, 512, 512, {128, 128, 256, 4, 0});
  const TuningRow small = row(KernelKind::forward, 256, 256, {64, 32, 0, 4, 0});
  ASSERT_GT(shared_bytes(spec(KernelKind::forward, 512), big.tuning), kHopperShared);
  const TuningTableSet set = make_table_set({big, small}, {});
  const auto m = find_row(set, spec(KernelKind::forward, 512), 8192, kHopperShared);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->row.tuning, small.tuning);
  // Nothing valid: no row.
  EXPECT_FALSE(
      find_row(make_table_set({big}, {}), spec(KernelKind::forward, 512), 8192, kHopperShared));
}

TEST(FindRow, OnlyTheNearestRowStandsIn) {
  // D = 255: the nearest row (256) holds a tuning that does not apply (a
  // producer warpgroup, which rows only 2-byte aligned cannot take): no row,
  // though the farther 64 row would be valid.
  TuningParams wgmma{128, 64, 0, 8, 0};
  wgmma.wgmma = true;
  TuningParams producer = wgmma;
  producer.producer = true;
  const KernelSpec d255 = spec(KernelKind::backward_query, 255);
  const TuningTableSet set = make_table_set({row(KernelKind::backward_query, 256, 256, producer),
                                             row(KernelKind::backward_query, 64, 64, kD)},
                                            {});
  EXPECT_FALSE(find_row(set, d255, 8192, kHopperShared));
  // A nearest row that applies stands in.
  const TuningTableSet usable = make_table_set(
      {row(KernelKind::backward_query, 256, 256, wgmma), row(KernelKind::backward_query, 64, 64, kD)},
      {});
  EXPECT_EQ(find_row(usable, spec(KernelKind::backward_query, 248), 8192, kHopperShared)->row.tuning,
            wgmma);
}

TEST(FindRow, TmaRowsOfAlignedHeadsLeaveTokenRowsToTheHeuristic) {
  // The forward on odd D reads token-row views whose tiles are wider than
  // those the D = 192 row was measured with: no row, the heuristic sizes them.
  TuningParams tma{192, 48, 0, 12, 0, true};
  tma.producer = tma.tma = true;
  const TuningTableSet set = make_table_set({row(KernelKind::forward, 192, 192, tma)}, {});
  KernelSpec odd = spec(KernelKind::forward, 191);
  odd.vec = 1;
  EXPECT_FALSE(find_row(set, odd, 8192, kHopperShared));
  // A row measured on the same alignment class applies.
  TuningRow measured = row(KernelKind::forward, 191, 191, tma);
  measured.vec = 1;
  EXPECT_EQ(find_row(make_table_set({measured}, {}), odd, 8192, kHopperShared)->row.tuning, tma);
  // So do the backward kernels: a key/value row measured on 16-byte rows
  // (D = 64) does not serve D = 60 on 8-byte rows.
  TuningParams key_value{128, 96, 0, 8, 0, true};
  key_value.producer = key_value.tma = true;
  KernelSpec narrower = spec(KernelKind::backward_key_value, 60);
  narrower.vec = 4;
  EXPECT_FALSE(find_row(make_table_set({row(KernelKind::backward_key_value, 64, 64, key_value)}, {}),
                        narrower, 8192, kHopperShared));
}

TEST(FindRow, RowsMeasuredOnUnalignedRowsDoNotServeAlignedOnes) {
  // D = 120 (16-byte rows): the D = 127 row, measured on 2-byte rows, is
  // nearer than the D = 128 row but could not measure the TMA copies.
  TuningParams staged{192, 80, 0, 12, 0, true};
  TuningParams tma{192, 64, 0, 12, 0, true};
  tma.producer = tma.tma = true;
  TuningRow odd = row(KernelKind::forward, 127, 127, staged);
  odd.vec = 1;
  const TuningTableSet set =
      make_table_set({odd, row(KernelKind::forward, 128, 128, tma)}, {});
  EXPECT_EQ(find_row(set, spec(KernelKind::forward, 120), 8192, kHopperShared)->row.tuning, tma);
  // Unaligned problems still find it.
  KernelSpec unaligned = spec(KernelKind::forward, 125);
  unaligned.vec = 1;
  EXPECT_EQ(find_row(set, unaligned, 8192, kHopperShared)->row.tuning, staged);
}

TEST(FindRow, WgmmaBackwardRowsServeTwoByteRows) {
  // The wgmma backward kernels stage rows only 2-byte aligned (odd D), so a
  // row tuned at D = 128 serves D = 127.
  TuningParams staged{128, 64, 0, 8, 0, true};
  KernelSpec odd = spec(KernelKind::backward_query, 127);
  odd.vec = 1;
  const auto m =
      find_row(make_table_set({row(KernelKind::backward_query, 128, 128, staged)}, {}), odd,
               8192, kHopperShared);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->row.tuning, staged);
}

TEST(FindRow, UserRowReplacesShippedRowOfTheSameKey) {
  const TuningTableSet set =
      make_table_set({row(KernelKind::forward, 64, 64, kA), row(KernelKind::forward, 128, 128, kB)},
                     {row(KernelKind::forward, 64, 64, kC)}, "/user/sm90.json");
  EXPECT_EQ(set.shipped.size(), 1u);  // the shipped 64 row is replaced
  const auto m = find_row(set, spec(KernelKind::forward, 64), 8192, kHopperShared);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->from_user);
  EXPECT_EQ(m->row.tuning, kC);
  // Shipped rows the user did not replace still apply.
  EXPECT_EQ(find_row(set, spec(KernelKind::forward, 128), 8192, kHopperShared)->row.tuning, kB);
}

TEST(FindRow, UserRowWinsAmongContainingRows) {
  const TuningTableSet set = make_table_set({row(KernelKind::forward, 64, 64, kA)},
                                            {row(KernelKind::forward, 32, 128, kC)});
  EXPECT_EQ(find_row(set, spec(KernelKind::forward, 64), 8192, kHopperShared)->row.tuning, kC);
}

// ---- lookup_tuning with the process-wide sources ----

// FLASHGEN_CACHE_DIR at a scratch directory, FLASHGEN_TUNING unset, only
// the user table (whatever the shipped one holds), and the tables reloaded
// before and after.
class LookupTest : public ::testing::Test {
 protected:
  LookupTest()
      : cache_("FLASHGEN_CACHE_DIR", dir_.path()),
        tuning_("FLASHGEN_TUNING", std::nullopt),
        tables_("FLASHGEN_TUNING_TABLES", std::string("user")) {
    reload_tuning_tables();
  }
  ~LookupTest() override { reload_tuning_tables(); }

  void write_user_rows(const std::vector<TuningRow>& rows) {
    write_tuning_table(user_tuning_table_path("sm_90a"), TuningTable{"sm90", rows});
    reload_tuning_tables();
  }

  TempDir dir_;
  ScopedEnv cache_, tuning_, tables_;
};

TEST_F(LookupTest, UserTableLivesInTheCacheDirectory) {
  EXPECT_EQ(user_tuning_table_path("sm_90a"), dir_.path() + "/tuning/sm90.json");
  EXPECT_EQ(user_tuning_table_path("sm_80"), dir_.path() + "/tuning/sm80.json");
}

TEST_F(LookupTest, UserTableRowIsUsed) {
  write_user_rows({row(KernelKind::forward, 64, 64, kB)});
  const auto t = lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64));
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, kB);
  // Another kind has no row: the caller's default applies.
  EXPECT_FALSE(lookup_tuning(spec(KernelKind::backward_query, 64), problem(8192, 64)));
}

// Answers are remembered per shape, but a reload (a new user table) and the
// overrides still take effect at once.
TEST_F(LookupTest, RememberedAnswersFollowReloadsAndOverrides) {
  write_user_rows({row(KernelKind::forward, 64, 64, kB)});
  EXPECT_EQ(lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kB);
  EXPECT_EQ(lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kB);
  {
    const ScopedTuningOverride force(KernelKind::forward, kC);
    EXPECT_EQ(lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kC);
  }
  EXPECT_EQ(lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kB);
  write_user_rows({row(KernelKind::forward, 64, 64, kD)});
  EXPECT_EQ(lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kD);
  // Another length is another question.
  write_user_rows({row(KernelKind::forward, 64, 64, kA, 1, 1024),
                   row(KernelKind::forward, 64, 64, kB, 4097, 8192)});
  EXPECT_EQ(lookup_tuning(spec(KernelKind::forward, 64), problem(512, 64)), kA);
  EXPECT_EQ(lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kB);
}

TEST_F(LookupTest, TablesCanBeSwitchedOff) {
  write_user_rows({row(KernelKind::forward, 64, 64, kB)});
  {
    ScopedEnv off("FLASHGEN_TUNING_TABLES", std::string("off"));
    reload_tuning_tables();
    EXPECT_FALSE(lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)));
  }
  {
    ScopedEnv bad("FLASHGEN_TUNING_TABLES", std::string("shipped-only"));
    reload_tuning_tables();
    EXPECT_THROW(lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), Error);
  }
  reload_tuning_tables();
  EXPECT_EQ(*lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kB);
}

TEST_F(LookupTest, NearestRowComesFromTheUserTable) {
  write_user_rows({row(KernelKind::forward, 128, 128, kB)});
  const auto t = lookup_tuning(spec(KernelKind::forward, 100), problem(1000, 100));
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, kB);
}

TEST_F(LookupTest, SharedLimitOfTheCallerDecidesValidity) {
  // 64 x 128 blocks at D = 128 need 64·136·2 + 2·128·136·2 = 87040 bytes.
  write_user_rows({row(KernelKind::forward, 128, 128, kB)});
  EXPECT_TRUE(lookup_tuning(spec(KernelKind::forward, 128), problem(8192, 128), 232448));
  EXPECT_FALSE(lookup_tuning(spec(KernelKind::forward, 128), problem(8192, 128), 65536));
}

TEST_F(LookupTest, MalformedUserTableIsReportedWithItsPath) {
  tune_test::write_file(user_tuning_table_path("sm_90a"),
                        tune_test::table_text(nlohmann::json::array({{{"kind", "forward"}}})));
  reload_tuning_tables();
  try {
    lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(dir_.path() + "/tuning/sm90.json: rows[0].dtype: missing"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(LookupTest, EnvironmentOverrideBeatsTables) {
  write_user_rows({row(KernelKind::forward, 64, 64, kB)});
  ScopedEnv env("FLASHGEN_TUNING",
                std::string("backward_query: rows=32 cols=16 head=0 warps=2 cache=none; "
                            "forward: rows=128 cols=32 head=0 warps=8 cache=none"));
  EXPECT_EQ(*lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kC);
  EXPECT_EQ(*lookup_tuning(spec(KernelKind::backward_query, 64), problem(8192, 64)),
            (TuningParams{32, 16, 0, 2, 0}));
  // Used as given, even where no row would apply.
  EXPECT_EQ(*lookup_tuning(spec(KernelKind::forward, 500), problem(8192, 500)), kC);
  // Only the kinds it names count as forced (the others keep what calls add
  // to a row: the forward's walk and turns, the memo).
  EXPECT_TRUE(tuning_overridden(KernelKind::forward));
  EXPECT_TRUE(tuning_overridden(KernelKind::backward_query));
  EXPECT_FALSE(tuning_overridden(KernelKind::backward_key_value));
}

TEST_F(LookupTest, MalformedEnvironmentOverrideIsAnError) {
  ScopedEnv env("FLASHGEN_TUNING", std::string("forward rows=64"));
  EXPECT_THROW(lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), Error);
}

TEST_F(LookupTest, ScopedOverrideBeatsEnvironmentAndNests) {
  ScopedEnv env("FLASHGEN_TUNING",
                std::string("forward: rows=128 cols=32 head=0 warps=8 cache=none"));
  {
    ScopedTuningOverride outer(KernelKind::forward, kA);
    EXPECT_EQ(*lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kA);
    {
      ScopedTuningOverride inner(KernelKind::forward, kD);
      EXPECT_EQ(*lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kD);
      // Other kinds are untouched.
      EXPECT_FALSE(lookup_tuning(spec(KernelKind::backward_key_value, 64), problem(8192, 64)));
    }
    EXPECT_EQ(*lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kA);
  }
  EXPECT_EQ(*lookup_tuning(spec(KernelKind::forward, 64), problem(8192, 64)), kC);
}

TEST(SharedLimit, OfArch) {
  EXPECT_EQ(shared_limit_of_arch("sm_90a"), 232448u);
  EXPECT_EQ(shared_limit_of_arch("sm_100a"), 232448u);
  EXPECT_EQ(shared_limit_of_arch("sm_80"), 166912u);
  EXPECT_EQ(shared_limit_of_arch("sm_86"), 101376u);
}

}  // namespace
}  // namespace flashgen
