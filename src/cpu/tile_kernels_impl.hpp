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

// GCC vector extension: 8 lanes of fp32 (one AVX register, two SSE ones).
typedef float Vec __attribute__((vector_size(32)));
typedef int IntVec __attribute__((vector_size(32)));
constexpr int kLanes = 8;
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
// addition (0 + x is not x for x = -0) and an 8-element initializer list
// compiles to a chain of inserts.
[[gnu::always_inline]] inline Vec splat(float x) {
  return __builtin_shufflevector(Vec{x}, Vec{x}, 0, 0, 0, 0, 0, 0, 0, 0);
}
[[gnu::always_inline]] inline Vec vmax(const Vec& a, const Vec& b) { return a > b ? a : b; }
[[gnu::always_inline]] inline Vec lane_index() { return Vec{0, 1, 2, 3, 4, 5, 6, 7}; }

// Horizontal sum in a fixed order (pairwise by halves).
[[gnu::always_inline]] inline float horizontal_sum(const Vec& v) {
  const float a = (v[0] + v[4]) + (v[2] + v[6]);
  const float b = (v[1] + v[5]) + (v[3] + v[7]);
  return a + b;
}
[[gnu::always_inline]] inline float horizontal_max(const Vec& v) {
  float m = v[0];
  for (int i = 1; i < kLanes; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// 2^x: x = r + f with r = round(x), f in [-1/2, 1/2]; 2^f from its degree-7
// Taylor polynomial (truncation error < 1e-8 relative), 2^r from exponent bits.
// Inputs are clamped to [-127, 127]; below -126.5 the exponent field is 0 and
// the result exactly 0.
[[gnu::always_inline]] inline Vec exp2_vec(const Vec& input) {
  Vec x = input;
  constexpr float kMin = -127.0f, kMax = 127.0f;
  // Adding 1.5·2^23 pushes the fraction out of the mantissa: the float sum is
  // round-to-nearest(x) + 1.5·2^23, and its low mantissa bits are that integer.
  constexpr float kRoundingMagic = 12582912.0f;
  constexpr int kExponentBias = 127;
  constexpr int kMantissaBits = 23;
  // ln(2)^k / k!
  constexpr float c1 = 0.693147180559945f, c2 = 0.240226506959101f,
                  c3 = 0.0555041086648216f, c4 = 0.00961812910762848f,
                  c5 = 0.00133335581464284f, c6 = 0.000154035303933816f,
                  c7 = 1.52527338040598e-05f;
  x = x < kMin ? splat(kMin) : x;
  x = x > kMax ? splat(kMax) : x;
  const Vec shifted = x + kRoundingMagic;
  const Vec rounded = shifted - kRoundingMagic;
  const Vec f = x - rounded;
  const IntVec integer = (IntVec)shifted - (IntVec)splat(kRoundingMagic);
  const Vec power = (Vec)((integer + kExponentBias) << kMantissaBits);
  Vec p = splat(c7);
  p = p * f + c6;
  p = p * f + c5;
  p = p * f + c4;
  p = p * f + c3;
  p = p * f + c2;
  p = p * f + c1;
  p = p * f + 1.0f;
  return p * power;
}

// Lanes of [base, base + 8) outside [begin, end) become kMaskedScore.
[[gnu::always_inline]] inline Vec mask_outside(const Vec& s, int base, int begin, int end) {
  const Vec column = lane_index() + static_cast<float>(base);
  const auto inside = (column >= static_cast<float>(begin)) & (column < static_cast<float>(end));
  return inside ? s : splat(kMaskedScore);
}

void gemm_nn(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
             int ldc, bool accumulate) {
  // 4 x 16 register block: per k, two B vectors and four broadcast A values
  // feed eight multiply-adds; the eight accumulators stay in registers.
  for (int i0 = 0; i0 < m; i0 += kTileRowMultiple) {
    const float* a0 = a + static_cast<std::int64_t>(i0) * lda;
    const float* a1 = a0 + lda;
    const float* a2 = a1 + lda;
    const float* a3 = a2 + lda;
    for (int j0 = 0; j0 < n; j0 += kTileColumnMultiple) {
      float* c0 = c + static_cast<std::int64_t>(i0) * ldc + j0;
      float* c1 = c0 + ldc;
      float* c2 = c1 + ldc;
      float* c3 = c2 + ldc;
      Vec acc00{}, acc01{}, acc10{}, acc11{}, acc20{}, acc21{}, acc30{}, acc31{};
      if (accumulate) {
        acc00 = load(c0), acc01 = load(c0 + kLanes);
        acc10 = load(c1), acc11 = load(c1 + kLanes);
        acc20 = load(c2), acc21 = load(c2 + kLanes);
        acc30 = load(c3), acc31 = load(c3 + kLanes);
      }
      const float* bk = b + j0;
      for (int kk = 0; kk < k; ++kk, bk += ldb) {
        const Vec b0 = load(bk), b1 = load(bk + kLanes);
        Vec x = splat(a0[kk]);
        acc00 += x * b0, acc01 += x * b1;
        x = splat(a1[kk]);
        acc10 += x * b0, acc11 += x * b1;
        x = splat(a2[kk]);
        acc20 += x * b0, acc21 += x * b1;
        x = splat(a3[kk]);
        acc30 += x * b0, acc31 += x * b1;
      }
      store(c0, acc00), store(c0 + kLanes, acc01);
      store(c1, acc10), store(c1 + kLanes, acc11);
      store(c2, acc20), store(c2 + kLanes, acc21);
      store(c3, acc30), store(c3 + kLanes, acc31);
    }
  }
}

void exp2_inplace(float* x, int n) {
  for (int j = 0; j < n; j += kLanes) store(x + j, exp2_vec(load(x + j)));
}

float online_softmax_row(float* scores, int n, int visible_begin, int visible_end,
                         float scale_log2, float& row_max, float& row_sum) {
  Vec block_max = splat(kMaskedScore);
  for (int j = 0; j < n; j += kLanes) {
    const Vec s = mask_outside(load(scores + j) * scale_log2, j, visible_begin, visible_end);
    store(scores + j, s);
    block_max = vmax(block_max, s);
  }
  const float old_max = row_max;
  const float block_row_max = horizontal_max(block_max);
  const float new_max = old_max > block_row_max ? old_max : block_row_max;
  // While every score so far is masked, subtract 0 instead of the (masked)
  // max: then P = exp2(masked) = 0 rather than exp2(0) = 1.
  const float reference = new_max == kMaskedScore ? 0.0f : new_max;
  Vec sum{};
  for (int j = 0; j < n; j += kLanes) {
    const Vec p = exp2_vec(load(scores + j) - reference);
    store(scores + j, p);
    sum += p;
  }
  const float correction = __builtin_exp2f(old_max - reference);
  row_max = new_max;
  row_sum = row_sum * correction + horizontal_sum(sum);
  return correction;
}

void probabilities_row(float* scores, int n, int visible_begin, int visible_end,
                       float scale_log2, float row_lse_log2) {
  for (int j = 0; j < n; j += kLanes) {
    const Vec s = mask_outside(load(scores + j) * scale_log2, j, visible_begin, visible_end);
    store(scores + j, exp2_vec(s - row_lse_log2));
  }
}

void probabilities_row_by_column(float* scores, int n, int visible_begin, int visible_end,
                                 float scale_log2, const float* column_lse_log2) {
  for (int j = 0; j < n; j += kLanes) {
    const Vec s = mask_outside(load(scores + j) * scale_log2, j, visible_begin, visible_end);
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
};

}  // namespace
}  // namespace flashgen::cpu::isa_kernels
