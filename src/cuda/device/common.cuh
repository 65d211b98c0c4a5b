// Basic types and conversions for NVRTC-compiled kernels. No host or toolkit
// headers: 16-bit values are carried as raw bits and converted with PTX.
#pragma once

#include "params.cuh"

namespace flashgen_device {

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

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

// The same for two adjacent floats (8-byte aligned), one reduction (sm_90).
__device__ __forceinline__ void atomic_add_pair(float* address, float first, float second) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(address), "f"(first), "f"(second)
               : "memory");
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
