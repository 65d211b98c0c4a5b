// The fp32 tile kernels of the CPU backend against plain loops.
#include "cpu/tile_math.hpp"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace flashgen::cpu {
namespace {

TEST(TileMath, Exp2IsAccurateAndZeroFarBelow) {
  std::vector<float> x;
  for (float v = -130.0f; v <= 20.0f; v += 0.01171875f) x.push_back(v);
  x.resize(round_up(static_cast<std::int64_t>(x.size()), kTileColumnMultiple), 0.0f);
  std::vector<float> y = x;
  exp2_inplace(y.data(), static_cast<int>(y.size()));
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
  exp2_inplace(masked, kTileColumnMultiple);
  for (float m : masked) EXPECT_EQ(m, 0.0f);
  float zero[kTileColumnMultiple] = {};
  exp2_inplace(zero, kTileColumnMultiple);
  EXPECT_EQ(zero[0], 1.0f);  // exp2(0) is exactly 1: one visible key gives P = 1
}

TEST(TileMath, GemmMatchesPlainLoops) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int k : {0, 1, 7, 64}) {
    const int m = 8, n = 32, lda = k + 3, ldb = n + 16, ldc = n + 5;
    std::vector<float> a(m * lda), b(std::max(k, 1) * ldb), c(m * ldc);
    for (float& e : a) e = uniform(rng);
    for (float& e : b) e = uniform(rng);
    for (bool accumulate : {false, true}) {
      for (float& e : c) e = uniform(rng);
      const std::vector<float> before = c;
      gemm_nn(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < ldc; ++j) {
          const float old = before[i * ldc + j];
          if (j >= n) {
            EXPECT_EQ(c[i * ldc + j], old) << "wrote outside the tile";
            continue;
          }
          double expected = accumulate ? old : 0.0;
          for (int kk = 0; kk < k; ++kk) expected += double(a[i * lda + kk]) * b[kk * ldb + j];
          EXPECT_NEAR(c[i * ldc + j], expected, 1e-5) << i << "," << j << " k=" << k;
        }
      }
    }
  }
}

TEST(TileMath, OnlineSoftmaxRowMasksAndRescales) {
  // Two blocks of one row; scale_log2 = 1 so scores are already log2 units.
  std::vector<float> first(kTileColumnMultiple, 0.0f), second(kTileColumnMultiple, 0.0f);
  first[0] = 1.0f, first[1] = 5.0f;  // column 1 is masked: visible [0, 1)
  second[2] = 3.0f;                  // visible [0, 4)
  float row_max = kMaskedScore, row_sum = 0.0f;
  float correction = online_softmax_row(first.data(), kTileColumnMultiple, 0, 1, 1.0f, row_max,
                                        row_sum);
  EXPECT_EQ(row_max, 1.0f);
  EXPECT_EQ(first[0], 1.0f);
  EXPECT_EQ(first[1], 0.0f);
  EXPECT_EQ(row_sum, 1.0f);
  EXPECT_EQ(correction, 0.0f);  // nothing accumulated before
  correction = online_softmax_row(second.data(), kTileColumnMultiple, 0, 4, 1.0f, row_max,
                                  row_sum);
  EXPECT_EQ(row_max, 3.0f);
  EXPECT_FLOAT_EQ(correction, 0.25f);
  EXPECT_FLOAT_EQ(second[2], 1.0f);
  EXPECT_FLOAT_EQ(second[0], 0.125f);
  EXPECT_EQ(second[4], 0.0f);
  EXPECT_FLOAT_EQ(row_sum, 0.25f + 1.0f + 3 * 0.125f);
}

TEST(TileMath, FullyMaskedRowStaysEmpty) {
  std::vector<float> s(kTileColumnMultiple, 2.0f);
  float row_max = kMaskedScore, row_sum = 0.0f;
  online_softmax_row(s.data(), kTileColumnMultiple, 0, 0, 1.0f, row_max, row_sum);
  EXPECT_EQ(row_sum, 0.0f);
  for (float p : s) EXPECT_EQ(p, 0.0f);
}

}  // namespace
}  // namespace flashgen::cpu
