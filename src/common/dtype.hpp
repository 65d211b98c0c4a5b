// Host conversions between the storage dtypes (f16, bf16, f32, e4m3) and float.
// Float -> 16-bit rounds to nearest, ties to even (what GPU conversions and
// PyTorch do); NaN stays NaN (quiet) and never turns into an infinity.
// Header-only so the CPU backend's tile loaders can inline them.
#pragma once

#include <bit>
#include <cstdint>

#include "flashgen/flashgen.hpp"

namespace flashgen {

// ---- bf16: the upper half of an IEEE float. ----

inline float bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    // NaN: keep sign and top payload bits, force the quiet bit so truncation
    // cannot yield an infinity.
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  }
  // Round to nearest even on the 16 dropped bits: add 0x7fff plus the lowest
  // kept bit, then truncate. A carry into the exponent is the correct result
  // (including overflow to infinity).
  const std::uint32_t lowest_kept = (x >> 16) & 1u;
  return static_cast<std::uint16_t>((x + 0x7fffu + lowest_kept) >> 16);
}

// ---- f16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. ----

inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa · 2^-24, exact in float.
    constexpr float kSubnormalUnit = 0x1p-24f;
    const float magnitude = static_cast<float>(mantissa) * kSubnormalUnit;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  if (exponent == 0x1fu) {
    // Infinity or NaN (payload kept).
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  constexpr std::uint32_t kRebias = 127 - 15;
  return std::bit_cast<float>(sign | ((exponent + kRebias) << 23) | (mantissa << 13));
}

inline std::uint16_t float_to_f16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t x = bits & 0x7fffffffu;
  if (x >= 0x7f800000u) {
    if (x == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
    // NaN: quiet, keep the top payload bits.
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  }
  // 65520 = halfway between the largest f16 (65504) and 2^16; ties go to the
  // even neighbour, which is the infinity.
  constexpr std::uint32_t kOverflowThreshold = 0x477ff000u;
  if (x >= kOverflowThreshold) return static_cast<std::uint16_t>(sign | 0x7c00u);
  // Below 2^-14 the result is subnormal (or zero): round mantissa · 2^(e-150)
  // to a multiple of 2^-24.
  constexpr std::uint32_t kSmallestNormal = 0x38800000u;  // 2^-14
  if (x < kSmallestNormal) {
    const int exponent = static_cast<int>(x >> 23);
    constexpr int kZeroBelowExponent = 102;  // values < 2^-25 round to zero
    if (exponent < kZeroBelowExponent) return sign;
    const std::uint32_t mantissa = (x & 0x7fffffu) | 0x800000u;
    const int shift = 126 - exponent;  // 14 .. 24
    std::uint32_t result = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (remainder > half || (remainder == half && (result & 1u))) ++result;
    return static_cast<std::uint16_t>(sign | result);
  }
  // Normal: rebias the exponent, then round the 13 dropped mantissa bits to
  // nearest even; a carry into the exponent is the correct result.
  constexpr std::uint32_t kRebias = static_cast<std::uint32_t>(127 - 15) << 23;
  const std::uint32_t rebased = x - kRebias;
  const std::uint32_t lowest_kept = (rebased >> 13) & 1u;
  return static_cast<std::uint16_t>(sign | ((rebased + 0xfffu + lowest_kept) >> 13));
}

// ---- e4m3 (fp8): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no
// infinity, S.1111.111 is NaN, the largest finite value 448. ----

inline float e4m3_to_float(std::uint8_t x) {
  const int exponent = (x >> 3) & 0xf, mantissa = x & 7;
  float magnitude;
  if (exponent == 0xf && mantissa == 7)
    magnitude = std::bit_cast<float>(0x7fc00000u);  // NaN
  else if (exponent == 0)
    magnitude = static_cast<float>(mantissa) * 0x1p-9f;  // subnormal: mantissa · 2^-9
  else
    magnitude = std::bit_cast<float>(static_cast<std::uint32_t>(exponent + 120) << 23 |
                                     static_cast<std::uint32_t>(mantissa) << 20);
  return (x & 0x80) ? -magnitude : magnitude;
}

// Round to nearest, ties to even, saturating: magnitudes past 448 (infinity
// included) give ±448, as the GPU's satfinite conversion; NaN gives NaN.
inline std::uint8_t float_to_e4m3(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint8_t sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t x = bits & 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7f);
  constexpr std::uint32_t k448 = 0x43e00000u;
  if (x >= k448) return static_cast<std::uint8_t>(sign | 0x7e);
  const int exponent = static_cast<int>(x >> 23) - 127;
  // Below 2^-6 the result is a multiple of 2^-9 (subnormal or zero);
  // otherwise 3 of the 23 mantissa bits are kept.
  const int shift = exponent < -6 ? 20 + (-6 - exponent) : 20;
  if (shift > 24) return sign;  // below 2^-10: rounds to zero
  std::uint32_t mantissa = (x & 0x7fffffu) | 0x800000u;  // with the hidden bit
  std::uint32_t kept = mantissa >> shift;
  const std::uint32_t remainder = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (kept & 1u))) ++kept;
  // kept counts units of the result's spacing: normal results are
  // (8 + mantissa) · 2^(exponent - 3); a carry to 16 steps the exponent.
  if (exponent < -6) return static_cast<std::uint8_t>(sign | kept);  // 8 is 2^-6: the smallest normal
  int biased = exponent + 7;
  if (kept == 16) kept = 8, ++biased;
  return static_cast<std::uint8_t>(sign | biased << 3 | (kept - 8));
}

// ---- Element access by dtype (offsets count elements). ----

inline float load_as_float(const void* base, DType dtype, std::int64_t offset) {
  switch (dtype) {
    case DType::f16:
      return f16_to_float(static_cast<const std::uint16_t*>(base)[offset]);
    case DType::bf16:
      return bf16_to_float(static_cast<const std::uint16_t*>(base)[offset]);
    case DType::e4m3:
      return e4m3_to_float(static_cast<const std::uint8_t*>(base)[offset]);
    case DType::f32:
      break;
  }
  return static_cast<const float*>(base)[offset];
}

inline void store_from_float(void* base, DType dtype, std::int64_t offset, float value) {
  switch (dtype) {
    case DType::f16:
      static_cast<std::uint16_t*>(base)[offset] = float_to_f16(value);
      return;
    case DType::bf16:
      static_cast<std::uint16_t*>(base)[offset] = float_to_bf16(value);
      return;
    case DType::e4m3:
      static_cast<std::uint8_t*>(base)[offset] = float_to_e4m3(value);
      return;
    case DType::f32:
      static_cast<float*>(base)[offset] = value;
      return;
  }
}

// The float nearest to `value` that the dtype can hold (round trip through it).
inline float round_to_dtype(float value, DType dtype) {
  switch (dtype) {
    case DType::f16:
      return f16_to_float(float_to_f16(value));
    case DType::bf16:
      return bf16_to_float(float_to_bf16(value));
    case DType::e4m3:
      return e4m3_to_float(float_to_e4m3(value));
    case DType::f32:
      break;
  }
  return value;
}

}  // namespace flashgen
