// The fp32 tile kernels of the CPU backend against plain loops, for every
// instruction set built here (the backend runs only the best one).
#include "cpu/tile_math.hpp"

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype.hpp"
#include "cpu/isa_dispatch.hpp"
#include "cpu/tile_kernels.hpp"

namespace flashgen::cpu {
namespace {

class TileMath : public ::testing::TestWithParam<const TileKernels*> {};

TEST_P(TileMath, Exp2IsAccurateAndZeroFarBelow) {
  const TileKernels& k = *GetParam();
  std::vector<float> x;
  for (float v = -130.0f; v <= 20.0f; v += 0.01171875f) x.push_back(v);
  x.resize(round_up(static_cast<std::int64_t>(x.size()), kTileColumnMultiple), 0.0f);
  std::vector<float> y = x;
  k.exp2_inplace(y.data(), static_cast<int>(y.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double exact = std::exp2(static_cast<double>(x[i]));
    if (x[i] < -126.5f) {
      EXPECT_EQ(y[i], 0.0f) << x[i];
    } else if (x[i] >= -126.0f) {
      EXPECT_NEAR(y[i], exact, 4e-7 * exact) << x[i];  // about 3 ulps
    }
  }
  float masked[kTileColumnMultiple];
  for (float& m : masked) m = kMaskedScore;
  k.exp2_inplace(masked, kTileColumnMultiple);
  for (float m : masked) EXPECT_EQ(m, 0.0f);
  float zero[kTileColumnMultiple] = {};
  k.exp2_inplace(zero, kTileColumnMultiple);
  EXPECT_EQ(zero[0], 1.0f);  // exp2(0) is exactly 1: one visible key gives P = 1
}

// `gemm` on random operands of shape m x k times k x n (with row gaps) against
// plain loops in fp64 over the operands as `operand` gives them, both with
// and without accumulating into C; nothing outside C's columns is written.
template <class Operand>
void expect_gemm_matches_loops(GemmFunction gemm, int m, int n, int k, Operand operand,
                               std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const int lda = k + 3, ldb = n + 16, ldc = n + 5;
  std::vector<float> a(m * lda), b(std::max(k, 1) * ldb), c(m * ldc);
  for (float& e : a) e = uniform(rng);
  for (float& e : b) e = uniform(rng);
  for (bool accumulate : {false, true}) {
    for (float& e : c) e = uniform(rng);
    const std::vector<float> before = c;
    gemm(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < ldc; ++j) {
        const float old = before[i * ldc + j];
        if (j >= n) {
          EXPECT_EQ(c[i * ldc + j], old) << "wrote outside the tile";
          continue;
        }
        double expected = accumulate ? old : 0.0;
        for (int kk = 0; kk < k; ++kk) {
          expected += double(operand(a[i * lda + kk])) * operand(b[kk * ldb + j]);
        }
        EXPECT_NEAR(c[i * ldc + j], expected, 1e-5)
            << i << "," << j << " m=" << m << " n=" << n << " k=" << k;
      }
    }
  }
}

TEST_P(TileMath, GemmMatchesPlainLoops) {
  std::mt19937 rng(3);
  // n covers every register-block width (16 ... 64 columns) and a remainder.
  for (const auto [m, n, k] :
       {std::tuple{8, 32, 0}, {8, 16, 1}, {8, 48, 7}, {12, 32, 64}, {8, 64, 9}, {20, 112, 33}}) {
    expect_gemm_matches_loops(
        GetParam()->gemm_nn, m, n, k, [](float x) { return x; }, rng);
  }
}

TEST_P(TileMath, OnlineSoftmaxRowMasksAndRescales) {
  const TileKernels& k = *GetParam();
  // Two blocks of one row; scale_log2 = 1 so scores are already log2 units.
  std::vector<float> first(kTileColumnMultiple, 0.0f), second(kTileColumnMultiple, 0.0f);
  first[0] = 1.0f, first[1] = 5.0f;  // column 1 is masked: visible [0, 1)
  second[2] = 3.0f;                  // visible [0, 4)
  float row_max = kMaskedScore, row_sum = 0.0f;
  float correction =
      k.online_softmax_row(first.data(), kTileColumnMultiple, 0, 1, 1.0f, row_max, row_sum);
  EXPECT_EQ(row_max, 1.0f);
  EXPECT_EQ(first[0], 1.0f);
  EXPECT_EQ(first[1], 0.0f);
  EXPECT_EQ(row_sum, 1.0f);
  EXPECT_EQ(correction, 0.0f);  // nothing accumulated before
  correction =
      k.online_softmax_row(second.data(), kTileColumnMultiple, 0, 4, 1.0f, row_max, row_sum);
  EXPECT_EQ(row_max, 3.0f);
  EXPECT_FLOAT_EQ(correction, 0.25f);
  EXPECT_FLOAT_EQ(second[2], 1.0f);
  EXPECT_FLOAT_EQ(second[0], 0.125f);
  EXPECT_EQ(second[4], 0.0f);
  EXPECT_FLOAT_EQ(row_sum, 0.25f + 1.0f + 3 * 0.125f);
}

TEST_P(TileMath, FullyMaskedRowStaysEmpty) {
  const TileKernels& k = *GetParam();
  std::vector<float> s(kTileColumnMultiple, 2.0f);
  float row_max = kMaskedScore, row_sum = 0.0f;
  k.online_softmax_row(s.data(), kTileColumnMultiple, 0, 0, 1.0f, row_max, row_sum);
  EXPECT_EQ(row_sum, 0.0f);
  for (float p : s) EXPECT_EQ(p, 0.0f);
}

TEST_P(TileMath, BackwardRowHelpers) {
  const TileKernels& k = *GetParam();
  constexpr int n = kTileColumnMultiple;
  std::vector<float> s(n), lse(n), p(n), dp(n), d(n);
  for (int j = 0; j < n; ++j) s[j] = 0.25f * j, lse[j] = 0.5f * j, d[j] = 0.1f * j;
  // Row form: visible [2, 5), P = exp2(s · 2 - 1).
  p = s;
  k.probabilities_row(p.data(), n, 2, 5, 2.0f, 1.0f);
  for (int j = 0; j < n; ++j) {
    const float expected = j >= 2 && j < 5 ? std::exp2(0.5f * j - 1.0f) : 0.0f;
    EXPECT_NEAR(p[j], expected, 1e-6f * expected) << j;
  }
  // Column form: P = exp2(s · 2 - lse[j]) = 1 where visible.
  p = s;
  k.probabilities_row_by_column(p.data(), n, 0, 7, 2.0f, lse.data());
  for (int j = 0; j < n; ++j) EXPECT_EQ(p[j], j < 7 ? 1.0f : 0.0f) << j;
  for (int j = 0; j < n; ++j) dp[j] = 1.0f;
  k.score_gradient_row_by_column(p.data(), dp.data(), n, d.data());
  for (int j = 0; j < n; ++j) EXPECT_FLOAT_EQ(dp[j], j < 7 ? 1.0f - 0.1f * j : 0.0f) << j;
  for (int j = 0; j < n; ++j) dp[j] = 3.0f;
  k.score_gradient_row(p.data(), dp.data(), n, 1.0f);
  for (int j = 0; j < n; ++j) EXPECT_EQ(dp[j], j < 7 ? 2.0f : 0.0f) << j;
  EXPECT_FLOAT_EQ(k.dot(s.data(), d.data(), n), [&] {
    float sum = 0;
    for (int j = 0; j < n; ++j) sum += s[j] * d[j];
    return sum;
  }());
  k.scale_inplace(s.data(), n, 4.0f);
  EXPECT_EQ(s[3], 3.0f);
}

TEST_P(TileMath, TransposesA16By16Block) {
  const TileKernels& k = *GetParam();
  constexpr int lds = 19, ldd = 23;
  std::vector<float> src(16 * lds), dst(16 * ldd, -1.0f);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
  k.transpose_16x16(src.data(), lds, dst.data(), ldd);
  for (int j = 0; j < 16; ++j) {
    for (int i = 0; i < ldd; ++i) {
      EXPECT_EQ(dst[j * ldd + i], i < 16 ? src[i * lds + j] : -1.0f) << j << "," << i;
    }
  }
}

// The bf16 GEMM (where the table has one) against plain loops over the
// operands rounded to bf16, summed in fp64: only the fp32 sums' rounding
// separates them.
class TileMathBf16 : public ::testing::TestWithParam<const TileKernels*> {};

TEST_P(TileMathBf16, GemmMatchesPlainLoopsOnRoundedOperands) {
  std::mt19937 rng(5);
  const auto bf16 = [](float x) { return bf16_to_float(float_to_bf16(x)); };
  for (const auto [m, n, k] :
       {std::tuple{4, 16, 1}, {8, 48, 7}, {36, 80, 127}, {64, 64, 64}, {32, 32, 33}}) {
    expect_gemm_matches_loops(GetParam()->gemm_bf16, m, n, k, bf16, rng);
  }
}

// The forward's softmax step that writes P rounded to bf16 into a packed A
// row: the same max, correction and sum as the fp32 step (its exp2 is only
// accurate to 2^-18), P within bf16's rounding of the fp32 step's, the
// scores left as they were and the row's padding zero.
TEST_P(TileMathBf16, OnlineSoftmaxRowWritesRoundedPIntoAPackedRow) {
  const TileKernels& k = *GetParam();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-20.0f, 20.0f);
  // 48 columns: an odd multiple of 16, so the row ends in 16 padding entries.
  for (const auto [n, begin, end] : {std::tuple{48, 3, 41}, {64, 0, 64}, {32, 0, 0}}) {
    const int pitch = packed_bf16_a_pitch(n);
    float max_fp32 = 2.0f, sum_fp32 = 1.5f, max_bf16 = max_fp32, sum_bf16 = sum_fp32;
    std::vector<float> scores(n), p_fp32(n);
    for (float& s : scores) s = uniform(rng);
    p_fp32 = scores;
    const std::vector<float> before = scores;
    std::vector<std::uint16_t> p_bf16(pitch, 0xffff);
    const float correction_fp32 =
        k.online_softmax_row(p_fp32.data(), n, begin, end, 0.5f, max_fp32, sum_fp32);
    const float correction_bf16 = k.online_softmax_row_bf16(scores.data(), n, begin, end, 0.5f,
                                                            max_bf16, sum_bf16, p_bf16.data());
    EXPECT_EQ(scores, before);
    EXPECT_EQ(max_bf16, max_fp32);
    EXPECT_EQ(correction_bf16, correction_fp32);
    EXPECT_NEAR(sum_bf16, sum_fp32, 4e-6 * sum_fp32);
    for (int j = 0; j < pitch; ++j) {
      if (j >= n) {
        EXPECT_EQ(p_bf16[j], 0) << "padding " << j;
        continue;
      }
      const float p = bf16_to_float(p_bf16[j]);
      EXPECT_NEAR(p, p_fp32[j], 0x1p-8 * p_fp32[j]) << j << " n=" << n;
      if (j < begin || j >= end) EXPECT_EQ(p_bf16[j], 0) << "masked " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, TileMath, ::testing::ValuesIn(runnable_tile_kernels()),
                         [](const ::testing::TestParamInfo<const TileKernels*>& info) {
                           return std::string(info.param->name);
                         });

std::vector<const TileKernels*> tables_with_bf16_gemm() {
  std::vector<const TileKernels*> tables;
  for (const TileKernels* table : runnable_tile_kernels()) {
    if (table->gemm_bf16 != nullptr) tables.push_back(table);
  }
  return tables;
}

// None on CPUs without bf16 dot products.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TileMathBf16);
INSTANTIATE_TEST_SUITE_P(Isa, TileMathBf16, ::testing::ValuesIn(tables_with_bf16_gemm()),
                         [](const ::testing::TestParamInfo<const TileKernels*>& info) {
                           return std::string(info.param->name);
                         });

TEST(TileMathDispatch, RunsTheBestKernelsUnlessTheEnvironmentNamesOthers) {
  const char* requested = std::getenv(kIsaEnvironmentVariable);
  EXPECT_EQ(&active_tile_kernels(), choose_tile_kernels(requested).kernels);
}

TEST(TileMathDispatch, ChoosesTheWidestRunnableInstructionSet) {
  const std::vector<const TileKernels*> tables = runnable_tile_kernels();
  EXPECT_EQ(tables.front(), &generic_tile_kernels());
  const TileKernels* best = choose_tile_kernels(nullptr).kernels;
  EXPECT_EQ(best, tables.back());
  EXPECT_EQ(choose_tile_kernels("").kernels, best);
  // The CPU's own report, independent of the tables' probes (AMX further
  // needs the OS's permission, which only the probe asks for).
  __builtin_cpu_init();
  const std::string name = best->name;
  if (__builtin_cpu_supports("avx512bf16")) {
    // AMD's bf16 dot products outpace its FMAs; Intel's do not (tile_kernels.hpp).
    const char* without_amx = __builtin_cpu_is("amd") ? "avx512_bf16" : "avx512";
    EXPECT_TRUE(name == "amx" || name == without_amx) << name;
  } else if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    EXPECT_EQ(name, "avx512");
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(name, "avx2");
  }
}

TEST(TileMathDispatch, HonoursANamedInstructionSetAndFallsBackFromAnUnknownOne) {
  for (const TileKernels* table : runnable_tile_kernels()) {
    const IsaChoice choice = choose_tile_kernels(table->name);
    EXPECT_EQ(choice.kernels, table) << table->name;
    EXPECT_TRUE(choice.warning.empty()) << choice.warning;
  }
  const IsaChoice unknown = choose_tile_kernels("neon");
  EXPECT_EQ(unknown.kernels, choose_tile_kernels(nullptr).kernels);
  EXPECT_NE(unknown.warning.find("neon"), std::string::npos) << unknown.warning;
}

}  // namespace
}  // namespace flashgen::cpu
