// The tile kernels' implementation, included by one translation unit per
// instruction set after it has set its target (tile_kernels.hpp says why).
// Everything here has internal linkage, so the copies cannot be confused at
// link time, and nothing here instantiates a standard-library template: a
// shared inline instantiation compiled for AVX2 could otherwise be picked for
// the baseline copy too.
//
// Every function sums in a fixed order that depends only on its arguments.
//
// The including file defines FLASHGEN_TILE_KERNELS_NAME and includes
// <cstdint>, tile_kernels.hpp and tile_math.hpp before setting its target.

namespace flashgen::cpu::isa_kernels {
namespace {

// GCC vector extension: kLanes fp32 lanes, one register of the file's
// widest vector unit (8 for AVX2, two SSE registers for the baseline; 16 for
// AVX-512). The including file sets FLASHGEN_TILE_VECTOR_LANES (default 8).
#if !defined(FLASHGEN_TILE_VECTOR_LANES)
#define FLASHGEN_TILE_VECTOR_LANES 8
#endif
constexpr int kLanes = FLASHGEN_TILE_VECTOR_LANES;
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
typedef int IntVec __attribute__((vector_size(kLanes * sizeof(int))));
static_assert(kTileColumnMultiple % kLanes == 0);

[[gnu::always_inline]] inline Vec load(const float* p) {
  Vec v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store(float* p, const Vec& v) {
  __builtin_memcpy(p, &v, sizeof v);
}
// A shuffle, which compiles to one broadcast: `Vec{} + x` costs a real
// addition (0 + x is not x for x = -0) and an initializer list compiles to a
// chain of inserts.
#if FLASHGEN_TILE_VECTOR_LANES == 16
[[gnu::always_inline]] inline Vec splat(float x) {
  return __builtin_shufflevector(Vec{x}, Vec{x}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
}
[[gnu::always_inline]] inline Vec lane_index() {
  return Vec{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
}
#else
[[gnu::always_inline]] inline Vec splat(float x) {
  return __builtin_shufflevector(Vec{x}, Vec{x}, 0, 0, 0, 0, 0, 0, 0, 0);
}
[[gnu::always_inline]] inline Vec lane_index() { return Vec{0, 1, 2, 3, 4, 5, 6, 7}; }
#endif
[[gnu::always_inline]] inline Vec vmax(const Vec& a, const Vec& b) { return a > b ? a : b; }

// Horizontal sum in a fixed order: lanes i and i + kLanes/2 first, then
// recursively by halves.
[[gnu::always_inline]] inline float horizontal_sum(const Vec& v) {
  float lanes[kLanes];
  __builtin_memcpy(lanes, &v, sizeof v);
#pragma GCC unroll 16
  for (int width = kLanes / 2; width >= 1; width /= 2) {
#pragma GCC unroll 16
    for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  }
  return lanes[0];
}
// By halves too (max is exact in any order); the halving compiles to shuffles
// where a lane-by-lane loop would not.
[[gnu::always_inline]] inline float horizontal_max(const Vec& v) {
  float lanes[kLanes];
  __builtin_memcpy(lanes, &v, sizeof v);
#pragma GCC unroll 16
  for (int width = kLanes / 2; width >= 1; width /= 2) {
#pragma GCC unroll 16
    for (int i = 0; i < width; ++i)
      lanes[i] = lanes[i + width] > lanes[i] ? lanes[i + width] : lanes[i];
  }
  return lanes[0];
}

// 2^x: x = r + f with r = round(x), f in [-1/2, 1/2]; 2^f from a degree-6
// polynomial, 2^r from exponent bits. Inputs above 127 are clamped to it;
// below -126.5 the result is exactly 0. NaN stays NaN.
constexpr float kExp2Min = -127.0f, kExp2Max = 127.0f;

// 2^f for f in [-1/2, 1/2]: the relative-minimax polynomial of degree 6 with
// p(0) = 1 (fitted in fp64, coefficients rounded to fp32): 9.7e-8 relative
// error in fp32 Horner steps, as the degree-7 Taylor polynomial it replaced
// (9.1e-8) with one multiply-add less per vector.
[[gnu::always_inline]] inline Vec exp2_fraction(const Vec& f) {
  constexpr float c1 = 0.6931471824645996f, c2 = 0.24022647738456726f,
                  c3 = 0.055503327399492264f, c4 = 0.009618427604436874f,
                  c5 = 0.0013398815644904971f, c6 = 0.00015356125368271023f;
  Vec p = splat(c6);
  p = p * f + c5;
  p = p * f + c4;
  p = p * f + c3;
  p = p * f + c2;
  p = p * f + c1;
  p = p * f + 1.0f;
  return p;
}

#if FLASHGEN_TILE_VECTOR_LANES == 16
// AVX-512 has the steps as instructions (round, scale by 2^r, a zeroing
// mask): no lower clamp is needed, since x below -126.5 (-inf, or a masked
// score) is masked to 0 whatever r and f became. vminps returns its second
// operand, x, when x is NaN.
[[gnu::always_inline]] inline Vec exp2_vec(const Vec& input) {
  const __m512 x = _mm512_min_ps(_mm512_set1_ps(kExp2Max), (__m512)input);
  const __m512 r = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __mmask16 kept = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExp2Min + 0.5f), _CMP_NLT_UQ);
  return (Vec)_mm512_maskz_scalef_ps(kept, (__m512)exp2_fraction((Vec)_mm512_sub_ps(x, r)), r);
}
#else
[[gnu::always_inline]] inline Vec exp2_vec(const Vec& input) {
  Vec x = input;
  // Adding 1.5·2^23 pushes the fraction out of the mantissa: the float sum is
  // round-to-nearest(x) + 1.5·2^23, and its low mantissa bits are that integer.
  constexpr float kRoundingMagic = 12582912.0f;
  constexpr int kExponentBias = 127;
  constexpr int kMantissaBits = 23;
  x = x < kExp2Min ? splat(kExp2Min) : x;
  x = x > kExp2Max ? splat(kExp2Max) : x;
  const Vec shifted = x + kRoundingMagic;
  const Vec rounded = shifted - kRoundingMagic;
  const IntVec integer = (IntVec)shifted - (IntVec)splat(kRoundingMagic);
  const Vec power = (Vec)((integer + kExponentBias) << kMantissaBits);
  return exp2_fraction(x - rounded) * power;
}
#endif

// Lanes of [base, base + 8) outside [begin, end) become kMaskedScore.
[[gnu::always_inline]] inline Vec mask_outside(const Vec& s, int base, int begin, int end) {
  const Vec column = lane_index() + static_cast<float>(base);
  const auto inside = (column >= static_cast<float>(begin)) & (column < static_cast<float>(end));
  return inside ? s : splat(kMaskedScore);
}

// C[rows, vectors · kLanes] (+)= A[rows, k] · B[k, vectors · kLanes] held in
// rows x vectors registers: per k, `vectors` B loads and `rows` broadcast A
// values feed rows · vectors multiply-adds. Each C element is one
// multiply-add chain over k = 0, 1, ..., so the block shape never changes a
// result.
template <int kRows, int kVectors>
[[gnu::always_inline]] inline void gemm_block(int k, const float* a, int lda, const float* b,
                                              int ldb, float* c, int ldc, bool accumulate) {
  Vec acc[kRows][kVectors];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v) {
      acc[r][v] = accumulate ? load(c + static_cast<std::int64_t>(r) * ldc + v * kLanes) : Vec{};
    }
  }
  for (int kk = 0; kk < k; ++kk, b += ldb) {
    Vec bv[kVectors];
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v) bv[v] = load(b + v * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const Vec x = splat(a[static_cast<std::int64_t>(r) * lda + kk]);
#pragma GCC unroll 8
      for (int v = 0; v < kVectors; ++v) acc[r][v] += x * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v) {
      store(c + static_cast<std::int64_t>(r) * ldc + v * kLanes, acc[r][v]);
    }
  }
}

// Register blocks: with 8 lanes, 4 x 16 (8 accumulators); with 16 lanes,
// 8 x 32 (16 of AVX-512's 32 registers: per k, 2 B loads feed 16
// multiply-adds), 4-row blocks for a last group of 4 rows and 16-column
// blocks for a last 16 columns.
constexpr int kTallRows = kLanes == 16 ? 2 * kTileRowMultiple : kTileRowMultiple;
constexpr int kWideVectors = kLanes == 16 ? 2 : kTileColumnMultiple / kLanes;

// C[:, columns] for one strip of B's columns, all rows of A.
template <int kVectors>
[[gnu::always_inline]] inline void gemm_strip(int m, int k, const float* a, int lda, const float* b,
                                              int ldb, float* c, int ldc, bool accumulate) {
  int i0 = 0;
  for (; i0 + kTallRows <= m; i0 += kTallRows) {
    gemm_block<kTallRows, kVectors>(k, a + static_cast<std::int64_t>(i0) * lda, lda, b, ldb,
                                    c + static_cast<std::int64_t>(i0) * ldc, ldc, accumulate);
  }
  for (; i0 < m; i0 += kTileRowMultiple) {
    gemm_block<kTileRowMultiple, kVectors>(k, a + static_cast<std::int64_t>(i0) * lda, lda, b, ldb,
                                           c + static_cast<std::int64_t>(i0) * ldc, ldc,
                                           accumulate);
  }
}

// Column strips outside, rows inside: a strip of B (k x 32 floats, 16 KiB at
// k = 128) stays in L1 while every row block of A passes over it, where the
// other order streams all of B from L2 once per row block.
void gemm_nn(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
             int ldc, bool accumulate) {
  constexpr int kStrip = kWideVectors * kLanes;
  int j0 = 0;
  for (; j0 + kStrip <= n; j0 += kStrip) {
    gemm_strip<kWideVectors>(m, k, a, lda, b + j0, ldb, c + j0, ldc, accumulate);
  }
  if (j0 < n) {
    gemm_strip<kTileColumnMultiple / kLanes>(m, k, a, lda, b + j0, ldb, c + j0, ldc, accumulate);
  }
}

void exp2_inplace(float* x, int n) {
  for (int j = 0; j < n; j += kLanes) store(x + j, exp2_vec(load(x + j)));
}

// scale · scores[j, j + kLanes) with the lanes outside [begin, end) masked;
// only vectors that straddle or leave [begin, end) pay for the mask.
[[gnu::always_inline]] inline Vec scaled_scores(const float* scores, int j, int begin, int end,
                                                float scale) {
  const Vec s = load(scores + j) * scale;
  return j >= begin && j + kLanes <= end ? s : mask_outside(s, j, begin, end);
}

// Both passes run two vectors per step into two accumulators: one chain of
// dependent max or add instructions per vector would hold each pass to their
// latency (with 16 lanes: 2.97 against 2.62 G scores/s at 256 columns, the
// cheaper exp2 included). n is a multiple of 16, so with 16 lanes a last
// single vector may remain.
float online_softmax_row(float* scores, int n, int visible_begin, int visible_end,
                         float scale_log2, float& row_max, float& row_sum) {
  // The row's max of S·c is (max of S)·c when c > 0 (rounding is monotonic),
  // so the first pass only reads; the second forms S·c - max in one
  // multiply-add.
  const bool positive_scale = scale_log2 > 0.0f;
  auto inside = [&](int j) { return j >= visible_begin && j + kLanes <= visible_end; };
  auto visible = [&](int j) {
    const Vec s = positive_scale ? load(scores + j) : load(scores + j) * scale_log2;
    return inside(j) ? s : mask_outside(s, j, visible_begin, visible_end);
  };
  Vec max0 = splat(kMaskedScore), max1 = max0;
  int j = 0;
  for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
    max0 = vmax(max0, visible(j));
    max1 = vmax(max1, visible(j + kLanes));
  }
  if (j < n) max0 = vmax(max0, visible(j));
  const float old_max = row_max;
  const float block_row_max = horizontal_max(vmax(max0, max1));
  const float scaled_block_max =
      positive_scale && block_row_max != kMaskedScore ? block_row_max * scale_log2 : block_row_max;
  const float new_max = old_max > scaled_block_max ? old_max : scaled_block_max;
  // While every score so far is masked, subtract 0 instead of the (masked)
  // max: then P = exp2(masked) = 0 rather than exp2(0) = 1.
  const float reference = new_max == kMaskedScore ? 0.0f : new_max;
  auto probabilities = [&](int j) {
    Vec x = load(scores + j) * scale_log2 - reference;
    if (!inside(j)) x = mask_outside(x, j, visible_begin, visible_end);
    const Vec p = exp2_vec(x);
    store(scores + j, p);
    return p;
  };
  Vec sum0{}, sum1{};
  for (j = 0; j + 2 * kLanes <= n; j += 2 * kLanes) {
    sum0 += probabilities(j);
    sum1 += probabilities(j + kLanes);
  }
  if (j < n) sum0 += probabilities(j);
  // The vector exp2 (no library call per row); exactly 1 when the max stays.
  const float correction = exp2_vec(splat(old_max - reference))[0];
  row_max = new_max;
  row_sum = row_sum * correction + horizontal_sum(sum0 + sum1);
  return correction;
}

void probabilities_row(float* scores, int n, int visible_begin, int visible_end,
                       float scale_log2, float row_lse_log2) {
  for (int j = 0; j < n; j += kLanes) {
    const Vec s = scaled_scores(scores, j, visible_begin, visible_end, scale_log2);
    store(scores + j, exp2_vec(s - row_lse_log2));
  }
}

void probabilities_row_by_column(float* scores, int n, int visible_begin, int visible_end,
                                 float scale_log2, const float* column_lse_log2) {
  for (int j = 0; j < n; j += kLanes) {
    const Vec s = scaled_scores(scores, j, visible_begin, visible_end, scale_log2);
    store(scores + j, exp2_vec(s - load(column_lse_log2 + j)));
  }
}

void score_gradient_row(const float* p, float* dp, int n, float row_d) {
  for (int j = 0; j < n; j += kLanes) store(dp + j, load(p + j) * (load(dp + j) - row_d));
}

void score_gradient_row_by_column(const float* p, float* dp, int n, const float* column_d) {
  for (int j = 0; j < n; j += kLanes) {
    store(dp + j, load(p + j) * (load(dp + j) - load(column_d + j)));
  }
}

float dot(const float* x, const float* y, int n) {
  Vec sum{};
  for (int j = 0; j < n; j += kLanes) sum += load(x + j) * load(y + j);
  return horizontal_sum(sum);
}

void scale_inplace(float* x, int n, float factor) {
  for (int j = 0; j < n; j += kLanes) store(x + j, load(x + j) * factor);
}

#include "cpu/tile_transpose_impl.hpp"

const TileKernels kIsaTileKernels = {
    FLASHGEN_TILE_KERNELS_NAME,
    gemm_nn,
    exp2_inplace,
    online_softmax_row,
    probabilities_row,
    probabilities_row_by_column,
    score_gradient_row,
    score_gradient_row_by_column,
    dot,
    scale_inplace,
    transpose_16x16,
};

}  // namespace
}  // namespace flashgen::cpu::isa_kernels
