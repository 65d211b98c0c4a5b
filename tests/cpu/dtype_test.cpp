// Host dtype conversions: exact round trips, round-to-nearest-even, NaN kept.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "common/dtype.hpp"

namespace flashgen {
namespace {

TEST(Dtype, EveryF16RoundTrips) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = f16_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(f)))) << std::hex << h;
    } else {
      EXPECT_EQ(float_to_f16(f), h) << std::hex << h;
    }
  }
}

TEST(Dtype, EveryBf16RoundTrips) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = bf16_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f)))) << std::hex << h;
    } else {
      EXPECT_EQ(float_to_bf16(f), h) << std::hex << h;
    }
  }
}

TEST(Dtype, RoundsToNearestEven) {
  // bf16 keeps 7 mantissa bits: one ulp at 1 is 2^-7.
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f)), 1.0f);                // tie -> even
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);  // tie -> even
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  // f16 keeps 10: one ulp at 1 is 2^-10.
  EXPECT_EQ(f16_to_float(float_to_f16(1.0f + 0x1p-11f)), 1.0f);
  EXPECT_EQ(f16_to_float(float_to_f16(1.0f + 3 * 0x1p-11f)), 1.0f + 0x1p-9f);
  // f16 subnormals are multiples of 2^-24.
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);         // tie -> even (zero)
  EXPECT_EQ(float_to_f16(1.5f * 0x1p-25f), 0x0001);
  EXPECT_EQ(float_to_f16(3 * 0x1p-25f), 0x0002);     // 1.5 units: tie -> even
  EXPECT_EQ(float_to_f16(-0x1p-24f), 0x8001);
  EXPECT_EQ(float_to_f16(0x1p-14f - 0x1p-26f), 0x0400);  // rounds up to the smallest normal
}

TEST(Dtype, OverflowAndSpecialValues) {
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // halfway to 2^16: the even neighbour is inf
  EXPECT_EQ(float_to_f16(-1e9f), 0xfc00);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(float_to_f16(INFINITY), 0x7c00);
  // NaN stays NaN even when only low payload bits are set (truncation would
  // give an infinity).
  const float low_payload_nan = std::bit_cast<float>(0x7f800001u);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(low_payload_nan))));
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(low_payload_nan))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(-NAN))));
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
}

TEST(Dtype, RandomFloatsRoundToTheNearestNeighbour) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    if (!std::isfinite(x)) continue;
    for (DType dtype : {DType::f16, DType::bf16}) {
      const float r = round_to_dtype(x, dtype);
      const std::uint16_t h = dtype == DType::f16 ? float_to_f16(x) : float_to_bf16(x);
      if (std::isinf(r)) continue;  // overflow: covered above
      // The neighbours of r on the dtype's grid are no closer to x.
      const auto neighbour = [&](int step) {
        const auto n = static_cast<std::uint16_t>(h + step);
        return dtype == DType::f16 ? f16_to_float(n) : bf16_to_float(n);
      };
      const double error = std::abs(static_cast<double>(x) - r);
      for (int step : {-1, 1}) {
        const float n = neighbour(step);
        if (std::isnan(n) || std::isinf(n) || std::signbit(n) != std::signbit(r)) continue;
        EXPECT_LE(error, std::abs(static_cast<double>(x) - n)) << x << " " << to_string(dtype);
      }
    }
  }
}

#if defined(__FLT16_MAX__)
TEST(Dtype, F16MatchesTheCompilersConversion) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(bits(rng)) * (i % 2 ? 1.0f : 0x1p-100f);
    if (std::isnan(x)) continue;
    const auto expected = std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
    EXPECT_EQ(float_to_f16(x), expected) << x;
  }
}
#endif

}  // namespace
}  // namespace flashgen
