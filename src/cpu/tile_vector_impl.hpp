// The tile kernels' vector helpers: the vector type, loads and stores,
// horizontal sums, exp2 and the column mask. Included inside the namespace of
// a kernel file (tile_kernels_impl.hpp, and tile_kernels_bf16.cpp for its
// softmax), after that file has set its target, so each copy is compiled for
// its instruction set; FLASHGEN_TILE_VECTOR_LANES (default 8) sets the width.
// Nothing here instantiates a standard-library template (tile_kernels_impl.hpp
// says why).

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

// Lanes combined by halves in a fixed order: lanes i and i + kLanes/2 first,
// then recursively; the halving compiles to shuffles where a lane-by-lane
// loop would not.
template <class Combine>
[[gnu::always_inline]] inline float horizontal_reduce(const Vec& v, Combine combine) {
  float lanes[kLanes];
  __builtin_memcpy(lanes, &v, sizeof v);
#pragma GCC unroll 16
  for (int width = kLanes / 2; width >= 1; width /= 2) {
#pragma GCC unroll 16
    for (int i = 0; i < width; ++i) lanes[i] = combine(lanes[i], lanes[i + width]);
  }
  return lanes[0];
}
[[gnu::always_inline]] inline float horizontal_sum(const Vec& v) {
  return horizontal_reduce(v, [](float a, float b) { return a + b; });
}
// Max is exact in any order.
[[gnu::always_inline]] inline float horizontal_max(const Vec& v) {
  return horizontal_reduce(v, [](float a, float b) { return b > a ? b : a; });
}

// 2^x = 2^f · 2^r: 2^f from a polynomial, 2^r from exponent bits. Inputs
// above 127 are clamped to it; below -126.5 the result is exactly 0. NaN
// stays NaN.
constexpr float kExp2Min = -127.0f, kExp2Max = 127.0f;

// The exp2 of tile_math.hpp (degree 6) unless a caller asks for less.
constexpr int kExp2Degree = 6;

// What exp2_vec may assume of its arguments: nothing (those above 127 are
// clamped to it), or that they are at most a rounding error above 0, as the
// softmax's s·c - max is, so that the upper clamp can go. NaN stays NaN
// either way.
enum class Exp2Range { any, at_most_zero };

// Horner steps in fp32, c[0] = 1 (so an exact 1 where f = 0).
template <int kDegree>
[[gnu::always_inline]] inline Vec polynomial(const Vec& f, const float (&c)[kDegree + 1]) {
  Vec p = splat(c[kDegree]);
#pragma GCC unroll 8
  for (int i = kDegree - 1; i >= 0; --i) p = p * f + c[i];
  return p;
}

// 2^f of the fraction f that exp2_vec (below) leaves of x, from
// relative-minimax polynomials with p(0) = 1 (fitted in fp64, coefficients
// rounded to fp32), in fp32 Horner steps. Degree 4 serves P rounded to bf16
// (half an ulp is 2^-9) before its GEMM: two multiply-adds less. Relative
// errors: f in [-1/2, 1/2] (row 0) 9.7e-8 at degree 6, as the degree-7 Taylor
// polynomial it replaced (9.1e-8) with one multiply-add less per vector, and
// 2.9e-6 (2^-18.4) at degree 4; f in [0, 1] (row 1, AVX-512's) 9.6e-8 and 3.0e-6.
constexpr float kExp2Fraction6[2][7] = {
    {1.0f, 0.6931471824645996f, 0.24022647738456726f, 0.055503327399492264f,
     0.009618427604436874f, 0.0013398815644904971f, 0.00015356125368271023f},
    {1.0f, 0.6931470632553101f, 0.2402293086051941f, 0.055485282093286514f,
     0.009675451554358006f, 0.0012467843480408192f, 0.00021612925047520548f}};
constexpr float kExp2Fraction4[2][5] = {
    {1.0f, 0.6931241750717163f, 0.24024099111557007f, 0.05590642988681793f, 0.009582854807376862f},
    {1.0f, 0.6930448412895203f, 0.2412802129983902f, 0.0522424578666687f, 0.013426695950329304f}};
constexpr int kExp2FractionFromZero = FLASHGEN_TILE_VECTOR_LANES == 16 ? 1 : 0;

template <int kDegree>
[[gnu::always_inline]] inline Vec exp2_fraction(const Vec& f) {
  static_assert(kDegree == 6 || kDegree == 4);
  if constexpr (kDegree == 6) {
    return polynomial<6>(f, kExp2Fraction6[kExp2FractionFromZero]);
  } else {
    return polynomial<4>(f, kExp2Fraction4[kExp2FractionFromZero]);
  }
}

#if FLASHGEN_TILE_VECTOR_LANES == 16
// AVX-512: f = x - floor(x) in [0, 1] in one instruction (vreduceps), and
// vscalefps multiplies by 2^floor(x) itself, so x needs no rounding step.
// x below -126.5 (-inf, or a masked score) is masked to 0 whatever f became.
// vminps returns its second operand, x, when x is NaN.
template <int kDegree = kExp2Degree, Exp2Range kRange = Exp2Range::any>
[[gnu::always_inline]] inline Vec exp2_vec(const Vec& input) {
  const __m512 x = kRange == Exp2Range::any
                       ? _mm512_min_ps(_mm512_set1_ps(kExp2Max), (__m512)input)
                       : (__m512)input;
  const __m512 f = _mm512_reduce_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __mmask16 kept = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExp2Min + 0.5f), _CMP_NLT_UQ);
  return (Vec)_mm512_maskz_scalef_ps(kept, (__m512)exp2_fraction<kDegree>((Vec)f), x);
}
#else
// x = r + f with r = round(x), f in [-1/2, 1/2].
template <int kDegree = kExp2Degree, Exp2Range kRange = Exp2Range::any>
[[gnu::always_inline]] inline Vec exp2_vec(const Vec& input) {
  Vec x = input;
  // Adding 1.5·2^23 pushes the fraction out of the mantissa: the float sum is
  // round-to-nearest(x) + 1.5·2^23, and its low mantissa bits are that integer.
  constexpr float kRoundingMagic = 12582912.0f;
  constexpr int kExponentBias = 127;
  constexpr int kMantissaBits = 23;
  x = x < kExp2Min ? splat(kExp2Min) : x;
  if constexpr (kRange == Exp2Range::any) x = x > kExp2Max ? splat(kExp2Max) : x;
  const Vec shifted = x + kRoundingMagic;
  const Vec rounded = shifted - kRoundingMagic;
  const IntVec integer = (IntVec)shifted - (IntVec)splat(kRoundingMagic);
  const Vec power = (Vec)((integer + kExponentBias) << kMantissaBits);
  return exp2_fraction<kDegree>(x - rounded) * power;
}
#endif

// Lanes of [base, base + 8) outside [begin, end) become kMaskedScore.
[[gnu::always_inline]] inline Vec mask_outside(const Vec& s, int base, int begin, int end) {
  const Vec column = lane_index() + static_cast<float>(base);
  const auto inside = (column >= static_cast<float>(begin)) & (column < static_cast<float>(end));
  return inside ? s : splat(kMaskedScore);
}
