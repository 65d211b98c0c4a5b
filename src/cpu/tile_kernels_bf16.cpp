// bf16 GEMMs for the CPU backend's bf16 inputs, on the AVX-512 kernels:
//   avx512_bf16: vdpbf16ps, 32 bf16 products per instruction into 16 fp32 sums;
//   amx:         AMX-BF16 tiles, a [16, 32] x [32, 16] product per instruction.
// Both read the same packed operands, rounded to bf16 once per call:
//   A [m_padded, k_padded]         bf16 row-major (each k pair one 32-bit word)
//   B [k_padded / 2, n_padded, 2]  bf16 "VNNI": B[2p, j] and B[2p + 1, j] side by side
// with zeros in the padding, so padded products add nothing.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/cpu_probes.hpp"
#include "cpu/isa_target.hpp"
#include "cpu/tile_kernels.hpp"
#include "cpu/tile_math.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#define FLASHGEN_HAS_BF16_KERNELS 1
#include <immintrin.h>
// GCC 12 reports the pass-through operand the intrinsics fill with
// _mm512_undefined_ps() as uninitialized (a false positive of GCC 12).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

FLASHGEN_ISA_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")

namespace flashgen::cpu::bf16_kernels {
namespace {

// One AMX tile: 16 rows of 64 bytes (16 fp32 or 32 bf16).
constexpr int kTileRows = 16;
constexpr int kTileBf16Columns = 32;
// Padding of the packed operands: whole AMX tiles, so one packing serves both
// kernels (vdpbf16ps needs only even k).
constexpr int kRowMultiple = 2 * kTileRows;       // 2 x 2 tiles of C per step
constexpr int kDepthMultiple = kTileBf16Columns;  // one A tile's k
constexpr int kColumnMultiple = 2 * kTileRows;
static_assert(kRowMultiple == kPackedBf16Multiple && kDepthMultiple == kPackedBf16Multiple &&
              kColumnMultiple == kPackedBf16Multiple);

constexpr int round_up_int(int value, int multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Scratch slots of tile_scratch().
enum Slot { kPackedA = 0, kPackedB = 1, kStagedC = 2 };

// A[m, k] fp32 (lda) -> [m_padded, k_padded] bf16, zero padded.
void pack_a(int m, int k, const float* a, int lda, std::uint16_t* out, int m_padded, int k_padded) {
  for (int i = 0; i < m_padded; ++i) {
    std::uint16_t* row = out + static_cast<std::int64_t>(i) * k_padded;
    const float* in = a + static_cast<std::int64_t>(i) * lda;
    for (int kk = 0; kk < k_padded; kk += 32) {
      __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
      if (i < m) {
        const int left = k - kk;
        const __mmask16 lo_mask = left >= 16 ? 0xffff : left <= 0 ? 0 : (1u << left) - 1;
        const __mmask16 hi_mask = left >= 32 ? 0xffff : left <= 16 ? 0 : (1u << (left - 16)) - 1;
        lo = _mm512_maskz_loadu_ps(lo_mask, in + kk);
        hi = _mm512_maskz_loadu_ps(hi_mask, in + kk + 16);
      }
      // Round to nearest even; lanes [0, 16) from lo, [16, 32) from hi.
      _mm512_storeu_si512(row + kk, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

// B[k, n] fp32 (ldb, n a multiple of 16) -> [k_padded / 2, n_padded, 2] bf16.
void pack_b(int k, int n, const float* b, int ldb, std::uint16_t* out, int k_padded, int n_padded) {
  // cvtne2ps gives [row 2p: 16 | row 2p+1: 16]; interleave to (2p, 2p+1) pairs.
  alignas(64) static constexpr std::uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  for (int p = 0; p < k_padded / 2; ++p) {
    const float* even = b + static_cast<std::int64_t>(2 * p) * ldb;
    const float* odd = even + ldb;
    std::uint16_t* row = out + static_cast<std::int64_t>(p) * n_padded * 2;
    for (int j = 0; j < n_padded; j += 16) {
      __m512 e = _mm512_setzero_ps(), o = _mm512_setzero_ps();
      if (j < n) {
        if (2 * p < k) e = _mm512_loadu_ps(even + j);
        if (2 * p + 1 < k) o = _mm512_loadu_ps(odd + j);
      }
      const __m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(o, e);
      _mm512_storeu_si512(row + 2 * j, _mm512_permutexvar_epi16(interleave, pairs));
    }
  }
}

struct Packed {
  const std::uint16_t* a;  // [m_padded, k_padded]
  const std::uint16_t* b;  // [k_padded / 2, b_pitch, 2]
  int m_padded, n_padded, k_padded;
  int b_pitch;  // columns of the packed B (>= n_padded)
};

Packed packed_shape(int m, int n, int k, const std::uint16_t* a, const std::uint16_t* b,
                    int b_pitch) {
  return {a,
          b,
          round_up_int(m, kRowMultiple),
          round_up_int(n, kColumnMultiple),
          round_up_int(k < 1 ? 1 : k, kDepthMultiple),
          b_pitch};
}

void pack_bf16_a(int m, int k, const float* a, int lda, std::uint16_t* out) {
  const Packed p = packed_shape(m, 0, k, nullptr, nullptr, 0);
  pack_a(m, k, a, lda, out, p.m_padded, p.k_padded);
}

void pack_bf16_b(int k, int n, const float* b, int ldb, std::uint16_t* out) {
  const Packed p = packed_shape(0, n, k, nullptr, nullptr, 0);
  pack_b(k, n, b, ldb, out, p.k_padded, p.n_padded);
}

Packed pack(int m, int n, int k, const float* a, int lda, const float* b, int ldb) {
  const Packed shape = packed_shape(m, n, k, nullptr, nullptr, 0);
  auto* a_packed =
      static_cast<std::uint16_t*>(tile_scratch(kPackedA, 2L * shape.m_padded * shape.k_padded));
  auto* b_packed =
      static_cast<std::uint16_t*>(tile_scratch(kPackedB, 2L * shape.k_padded * shape.n_padded));
  pack_bf16_a(m, k, a, lda, a_packed);
  pack_bf16_b(k, n, b, ldb, b_packed);
  return packed_shape(m, n, k, a_packed, b_packed, shape.n_padded);
}

// ---- P for the P·V GEMM ----

#define FLASHGEN_TILE_VECTOR_LANES 16
#include "cpu/tile_vector_impl.hpp"
#include "cpu/tile_softmax_impl.hpp"

// What P's exp2 needs here: P is rounded to bf16 (half an ulp is 2^-9 of it)
// before its GEMM, so the degree-4 polynomial (2^-18.4) loses nothing that
// rounding keeps.
constexpr int kBf16Exp2Degree = 4;

// The forward's softmax step with P rounded to bf16 as it is made, written as
// row `p` of the packed A operand: no fp32 P stored, and no packing pass that
// reads it back.
float online_softmax_row_bf16(const float* scores, int n, int visible_begin, int visible_end,
                              float scale_log2, float& row_max, float& row_sum,
                              std::uint16_t* p) {
  struct IntoPackedRow {
    std::uint16_t* row;
    void operator()(int j, const Vec& p0, const Vec& p1) const {
      // Round to nearest even, as pack_a; lanes [0, 16) from p0.
      _mm512_storeu_si512(row + j, (__m512i)_mm512_cvtne2ps_pbh((__m512)p1, (__m512)p0));
    }
    void operator()(int j, const Vec& p0) const {
      // The last 16 of an odd multiple of 16, then the row's zero padding.
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + j),
                          (__m256i)_mm512_cvtneps_pbh((__m512)p0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + j + 16), _mm256_setzero_si256());
    }
  };
  static_assert(kPackedBf16Multiple == 2 * kLanes);
  return online_softmax_step<kBf16Exp2Degree>(scores, n, visible_begin, visible_end, scale_log2,
                                              row_max, row_sum, IntoPackedRow{p});
}

// ---- vdpbf16ps ----

// C[4, 16 · kVectors] (+)= A·B from the packed operands: per k pair, kVectors
// B loads and 4 broadcast A pairs feed 4 · kVectors vdpbf16ps.
template <int kVectors>
[[gnu::always_inline]] inline void dot_block(const Packed& p, int i0, int j0, float* c, int ldc,
                                             bool accumulate) {
  constexpr int kRows = kTileRowMultiple;
  __m512 acc[kRows][kVectors];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      acc[r][v] = accumulate ? _mm512_loadu_ps(c + static_cast<std::int64_t>(r) * ldc + 16 * v)
                             : _mm512_setzero_ps();
    }
  }
  const auto* a_pairs = reinterpret_cast<const std::uint32_t*>(p.a) +
                        static_cast<std::int64_t>(i0) * (p.k_padded / 2);
  const std::uint16_t* b = p.b + 2 * j0;
  for (int pair = 0; pair < p.k_padded / 2; ++pair, b += 2 * p.b_pitch) {
    __m512bh bv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + 32 * v);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(
          static_cast<int>(a_pairs[static_cast<std::int64_t>(r) * (p.k_padded / 2) + pair]));
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, bv[v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      _mm512_storeu_ps(c + static_cast<std::int64_t>(r) * ldc + 16 * v, acc[r][v]);
    }
  }
}

void gemm_dot_packed(const Packed& p, int m, int n, float* c, int ldc, bool accumulate) {
  for (int i0 = 0; i0 < m; i0 += kTileRowMultiple) {
    float* c_rows = c + static_cast<std::int64_t>(i0) * ldc;
    int j0 = 0;
    for (; j0 + 64 <= n; j0 += 64) dot_block<4>(p, i0, j0, c_rows + j0, ldc, accumulate);
    const int rest = (n - j0) / 16;
    if (rest == 3) dot_block<3>(p, i0, j0, c_rows + j0, ldc, accumulate);
    if (rest == 2) dot_block<2>(p, i0, j0, c_rows + j0, ldc, accumulate);
    if (rest == 1) dot_block<1>(p, i0, j0, c_rows + j0, ldc, accumulate);
  }
}

// ---- AMX ----

// The tile configuration (palette 1): every tile 16 rows x 64 bytes.
// tmm0..3: C blocks (rows i, i+16) x (columns j, j+16), fp32
// tmm4, 5: A rows i and i+16, 32 bf16 of k
// tmm6, 7: B columns j and j+16, 16 k pairs
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

void gemm_amx_packed(const Packed& p, int m, int n, float* c, int ldc, bool accumulate) {
  // C goes through a staging copy unless it is whole tiles.
  const bool direct = m % kRowMultiple == 0 && n % kColumnMultiple == 0;
  float* staged = c;
  int staged_ld = ldc;
  if (!direct) {
    staged_ld = p.n_padded;
    staged = static_cast<float*>(tile_scratch(kStagedC, 4L * p.m_padded * p.n_padded));
    for (int i = 0; i < p.m_padded; ++i) {
      float* row = staged + static_cast<std::int64_t>(i) * staged_ld;
      if (accumulate && i < m) {
        std::memcpy(row, c + static_cast<std::int64_t>(i) * ldc, sizeof(float) * n);
        std::memset(row + n, 0, sizeof(float) * (p.n_padded - n));
      } else {
        std::memset(row, 0, sizeof(float) * p.n_padded);
      }
    }
  }
  // Configured on every call: other code on this thread (oneDNN under torch,
  // say) may have loaded its own configuration since the last one.
  TileConfig config;
  for (int t = 0; t < 8; ++t) config.bytes_per_row[t] = 64, config.rows[t] = kTileRows;
  _tile_loadconfig(&config);
  const long a_stride = 2L * p.k_padded;
  const long b_stride = 4L * p.b_pitch;
  const long c_stride = 4L * staged_ld;
  const bool load_c = accumulate || !direct;
  for (int i0 = 0; i0 < p.m_padded; i0 += kRowMultiple) {
    for (int j0 = 0; j0 < p.n_padded; j0 += kColumnMultiple) {
      float* c0 = staged + static_cast<std::int64_t>(i0) * staged_ld + j0;
      float* c1 = c0 + static_cast<std::int64_t>(kTileRows) * staged_ld;
      if (load_c) {
        _tile_loadd(0, c0, c_stride);
        _tile_loadd(1, c0 + kTileRows, c_stride);
        _tile_loadd(2, c1, c_stride);
        _tile_loadd(3, c1 + kTileRows, c_stride);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      const std::uint16_t* a0 = p.a + static_cast<std::int64_t>(i0) * p.k_padded;
      const std::uint16_t* a1 = a0 + static_cast<std::int64_t>(kTileRows) * p.k_padded;
      for (int kk = 0; kk < p.k_padded; kk += kTileBf16Columns) {
        const std::uint16_t* b0 = p.b + static_cast<std::int64_t>(kk / 2) * p.b_pitch * 2 + 2 * j0;
        // Each product as soon as its operands are in: the loads of the
        // others overlap it.
        _tile_loadd(4, a0 + kk, a_stride);
        _tile_loadd(6, b0, b_stride);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, b0 + 2 * kTileRows, b_stride);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a1 + kk, a_stride);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, c0, c_stride);
      _tile_stored(1, c0 + kTileRows, c_stride);
      _tile_stored(2, c1, c_stride);
      _tile_stored(3, c1 + kTileRows, c_stride);
    }
  }
  // Back to the initial state: the OS need not save tiles at a context switch.
  _tile_release();
  if (!direct) {
    for (int i = 0; i < m; ++i) {
      std::memcpy(c + static_cast<std::int64_t>(i) * ldc,
                  staged + static_cast<std::int64_t>(i) * staged_ld, sizeof(float) * n);
    }
  }
}

// The table's entries: on fp32 operands (packed here) and on packed ones.
template <void (*kKernel)(const Packed&, int, int, float*, int, bool)>
void gemm_fp32_operands(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                        float* c, int ldc, bool accumulate) {
  kKernel(pack(m, n, k, a, lda, b, ldb), m, n, c, ldc, accumulate);
}

template <void (*kKernel)(const Packed&, int, int, float*, int, bool)>
void gemm_packed_operands(int m, int n, int k, const std::uint16_t* a, const std::uint16_t* b,
                          int b_pitch, float* c, int ldc, bool accumulate) {
  kKernel(packed_shape(m, n, k, a, b, b_pitch), m, n, c, ldc, accumulate);
}

}  // namespace
}  // namespace flashgen::cpu::bf16_kernels

FLASHGEN_ISA_TARGET_END

#endif

namespace flashgen::cpu {
namespace {

// `storage` made the AVX-512 table with bf16 GEMMs of its own; null without
// AVX-512 or when `runnable` is false.
template <void (*kKernel)(const bf16_kernels::Packed&, int, int, float*, int, bool)>
const TileKernels* with_bf16_gemm(TileKernels& storage, const char* name, bool runnable) {
  const TileKernels* avx512 = avx512_tile_kernels();
  if (avx512 == nullptr || !runnable) return nullptr;
  storage = *avx512;
  storage.name = name;
  storage.gemm_bf16 = bf16_kernels::gemm_fp32_operands<kKernel>;
  storage.pack_bf16_a = bf16_kernels::pack_bf16_a;
  storage.pack_bf16_b = bf16_kernels::pack_bf16_b;
  storage.gemm_bf16_packed = bf16_kernels::gemm_packed_operands<kKernel>;
  storage.online_softmax_row_bf16 = bf16_kernels::online_softmax_row_bf16;
  return &storage;
}

}  // namespace

const TileKernels* avx512_bf16_tile_kernels() {
#if defined(FLASHGEN_HAS_BF16_KERNELS)
  static TileKernels storage;
  static const TileKernels* const table = with_bf16_gemm<bf16_kernels::gemm_dot_packed>(
      storage, "avx512_bf16", cpu_has_bf16_dot());
  return table;
#else
  return nullptr;
#endif
}

bool bf16_dot_outpaces_fma() {
#if defined(FLASHGEN_HAS_BF16_KERNELS)
  return cpu_has_bf16_dot() && cpu_is_amd();
#else
  return false;
#endif
}

const TileKernels* amx_tile_kernels() {
#if defined(FLASHGEN_HAS_BF16_KERNELS)
  static TileKernels storage;
  static const TileKernels* const table = with_bf16_gemm<bf16_kernels::gemm_amx_packed>(
      storage, "amx", cpu_has_bf16_dot() && amx_usable());
  return table;
#else
  return nullptr;
#endif
}

}  // namespace flashgen::cpu
