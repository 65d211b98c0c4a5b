// Basic types and conversions for NVRTC-compiled kernels. No host or toolkit
// headers: 16-bit values are carried as raw bits and converted with PTX.
#pragma once

#include "params.cuh"

namespace flashgen_device {

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef unsigned char u8;

// Masked scores use a large finite negative: exp2 of it is 0, and a row whose
// scores are all masked still has finite arithmetic (no -inf - -inf = NaN).
constexpr float kMaskedScore = -1.0e30f;
constexpr float kMaskedThreshold = -1.0e29f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kLog2e = 1.4426950408889634f;

// std::conditional, which NVRTC code cannot include.
template <bool kCondition, class T, class F>
struct select_type {
  typedef T type;
};
template <class T, class F>
struct select_type<false, T, F> {
  typedef F type;
};

// kF32: fp32 tensors, which only the fp32 kernels (kernels/f32/simt.cuh) take.
enum ElementType { kF16 = 0, kBF16 = 1, kF32 = 2 };

// Pack two floats into one 32-bit register of two 16-bit values (lo first),
// rounding to nearest even.
template <int E>
__device__ __forceinline__ u32 pack2(float lo, float hi) {
  u32 r;
  if (E == kBF16) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

template <int E>
__device__ __forceinline__ float to_float(u16 bits) {
  if (E == kBF16) return __uint_as_float(u32(bits) << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
  return f;
}

template <int E>
__device__ __forceinline__ u16 from_float(float x) {
  u16 r;
  if (E == kBF16) {
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  } else {
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
  }
  return r;
}

// ---- e4m3 (fp8, an fp8 KV cache's bytes): 1 sign, 4 exponent (bias 7) and
// 3 mantissa bits, no infinity, S.1111.111 NaN; as the host's
// (common/dtype.hpp), which the CPU backend and the reference use. ----

// One e4m3 value: its bits below the sign, shifted into an f16's place,
// are the value · 2^-8, normal and subnormal alike.
__device__ __forceinline__ float e4m3_to_float(u32 byte) {
  const u32 magnitude = byte & 0x7f;
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(static_cast<u16>(magnitude << 7)));
  value = magnitude == 0x7f ? __int_as_float(0x7fc00000) : value * 256.0f;
  return (byte & 0x80) ? -value : value;
}

// Two e4m3 values (the low byte first) as an f16 pair, exactly: every
// e4m3 value is an f16.
__device__ __forceinline__ u32 e4m3_pair_to_f16(u32 pair) {
#if __CUDA_ARCH__ >= 890
  u32 halves;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(static_cast<u16>(pair)));
  return halves;
#else
  return pack2<kF16>(e4m3_to_float(pair & 0xff), e4m3_to_float((pair >> 8) & 0xff));
#endif
}

// x rounded to e4m3: to nearest, ties to even, saturating at ±448 (infinity
// included); NaN gives NaN.
__device__ __forceinline__ u8 float_to_e4m3(float x) {
#if __CUDA_ARCH__ >= 890
  u16 pair;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(x));
  return static_cast<u8>(pair);
#else
  const u32 bits = __float_as_uint(x);
  const u32 sign = (bits >> 24) & 0x80u, magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<u8>(sign | 0x7f);
  if (magnitude >= 0x43e00000u) return static_cast<u8>(sign | 0x7e);  // 448 and past
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  // Below 2^-6 a multiple of 2^-9 (subnormal or zero); otherwise 3 mantissa bits kept.
  const int shift = exponent < -6 ? 20 + (-6 - exponent) : 20;
  if (shift > 24) return static_cast<u8>(sign);
  const u32 mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  u32 kept = mantissa >> shift;
  const u32 remainder = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (kept & 1u))) ++kept;
  if (exponent < -6) return static_cast<u8>(sign | kept);
  int biased = exponent + 7;
  if (kept == 16) kept = 8, ++biased;
  return static_cast<u8>(sign | biased << 3 | (kept - 8));
#endif
}

__device__ __forceinline__ float negative_infinity() { return __int_as_float(0xff800000u); }

// 2^x with the special-function unit; inputs far below the float range give 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float fast_log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float fast_reciprocal(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// tanh(x) = 1 − 2 / (e^2x + 1) from one exp2 and one reciprocal: an absolute
// error of a few fp32 ulps (tanh.approx's relative 2^-11 would move a soft
// cap of 50 by 0.02), and ±1 where e^2x leaves the float range.
__device__ __forceinline__ float fast_tanh(float x) {
  constexpr float kTwoLog2e = 2.8853900817779268f;
  return 1.0f - 2.0f * fast_reciprocal(fast_exp2(x * kTwoLog2e) + 1.0f);
}

// Fire-and-forget fp32 add to global memory (the atomic backward's dQ).
__device__ __forceinline__ void atomic_add(float* address, float value) {
  asm volatile("red.global.add.f32 [%0], %1;" ::"l"(address), "f"(value) : "memory");
}

__device__ __forceinline__ u32 shared_address(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// The first element of one (batch, head) slice of a [batch, seq, heads, dim]
// tensor, as T (u16 or float, const for inputs).
template <class T>
__device__ __forceinline__ T* head_slice(const TensorArg& t, int batch, int head) {
  return static_cast<T*>(t.data) + batch * t.stride_batch + head * t.stride_heads;
}

// f(s[rt][ct][i], rt, ct, i) for every element of a warp's accumulator
// fragments [kRowTiles][kColTiles][4], unrolled (the indices are constants
// in each copy of f).
template <int kRowTiles, int kColTiles, class F>
__device__ __forceinline__ void for_each_element(float (&s)[kRowTiles][kColTiles][4], F f) {
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int ct = 0; ct < kColTiles; ++ct)
#pragma unroll
      for (int i = 0; i < 4; ++i) f(s[rt][ct][i], rt, ct, i);
}

template <class T>
__device__ __forceinline__ T max_of(T a, T b) { return a > b ? a : b; }
template <class T>
__device__ __forceinline__ T min_of(T a, T b) { return a < b ? a : b; }

constexpr __device__ __host__ int ceil_div(int a, int b) { return (a + b - 1) / b; }
constexpr __device__ __host__ int round_up(int a, int b) { return ceil_div(a, b) * b; }

// Columns of one chunk when a head dim is split across `chunks` CTAs, each
// chunk a whole number of 16-column MMA tiles (the host computes the same).
constexpr __device__ __host__ int chunk_width(int dim, int chunks) {
  return round_up(ceil_div(round_up(dim, 16), chunks), 16);
}

}  // namespace flashgen_device
