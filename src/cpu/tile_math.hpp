// Tile arithmetic for the CPU flash backend: the GEMMs (fp32, and bf16 for
// bf16 inputs) and the softmax steps, on contiguous row-major fp32 tiles
// whose column counts are padded to kTileColumnMultiple (padding columns hold
// zeros).
//
// Every function sums in a fixed order that depends only on the tile shape,
// never on threads, so the backend is bit-identical for any thread count.
// They are compiled once per instruction set (baseline, AVX2, AVX-512,
// AVX512-BF16, AMX) and one set is picked per process (isa_dispatch.hpp);
// results may differ between sets (fused multiply-adds, bf16 GEMMs), never
// between runs or thread counts with one set.
#pragma once

#include <cstdint>

#include "flashgen/flashgen.hpp"

namespace flashgen::cpu {

// Rows of a GEMM output (M) must be a multiple of kTileRowMultiple and columns
// (N) of kTileColumnMultiple: the micro-kernels compute blocks of 4 (or 8)
// rows and 16 (or 32) columns.
inline constexpr int kTileRowMultiple = 4;
inline constexpr int kTileColumnMultiple = 16;

constexpr std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Score given to masked (query, key) pairs, in log2 units. Finite, so that
// "masked minus running max" never computes -inf - (-inf); exp2 of anything
// this negative is exactly 0.
inline constexpr float kMaskedScore = -1.0e30f;

// C[M, N] (+)= A[M, K] · B[K, N]; all row-major with leading dimensions lda,
// ldb, ldc (elements). accumulate=false overwrites C. For each C element the
// sum runs over k = 0, 1, ..., K-1 in order.
void gemm_nn(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
             int ldc, bool accumulate);

// gemm_nn for bf16 inputs: both operands rounded to bf16 (exact for values
// that came from bf16 tensors; P and dS lose what a bf16 GEMM loses), products
// summed in fp32, on the CPU's bf16 dot products (AVX512-BF16, AMX). Where
// there are none, the fp32 gemm_nn. Sums in a fixed order for given shapes.
void gemm_bf16(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
               int ldc, bool accumulate);

// gemm_bf16 on operands packed once, where the CPU has bf16 GEMMs
// (has_packed_bf16_gemm()): A [m, k] packed into packed_bf16_a_elements(m, k)
// elements, B [k, n] into packed_bf16_b_elements(k, n), with
// packed_bf16_b_pitch(n) columns, which gemm_bf16_packed takes as b_pitch.
// The GEMM may use fewer of B's columns (n) and rows (k) than were packed.
// A packed A is row-major bf16, packed_bf16_a_pitch(k) elements a row, zero
// beyond k and in the rows beyond m up to the next multiple of 32 (the GEMM
// may read them), so its rows can also be written one at a time.
inline constexpr int kPackedBf16Multiple = 32;
bool has_packed_bf16_gemm();
inline std::int64_t packed_bf16_a_elements(std::int64_t m, std::int64_t k) {
  return round_up(m, kPackedBf16Multiple) * round_up(k < 1 ? 1 : k, kPackedBf16Multiple);
}
// Elements from one row of a packed A to the next.
inline int packed_bf16_a_pitch(int k) {
  return static_cast<int>(round_up(k < 1 ? 1 : k, kPackedBf16Multiple));
}
inline int packed_bf16_b_pitch(int n) { return static_cast<int>(round_up(n, kPackedBf16Multiple)); }
inline std::int64_t packed_bf16_b_elements(std::int64_t k, int n) {
  return round_up(k < 1 ? 1 : k, kPackedBf16Multiple) * packed_bf16_b_pitch(n);
}
void pack_bf16_a(int m, int k, const float* a, int lda, std::uint16_t* out);
void pack_bf16_b(int k, int n, const float* b, int ldb, std::uint16_t* out);
void gemm_bf16_packed(int m, int n, int k, const std::uint16_t* a, const std::uint16_t* b,
                      int b_pitch, float* c, int ldc, bool accumulate);

using GemmFunction = void (*)(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                              float* c, int ldc, bool accumulate);
// The GEMM for a problem's inputs: gemm_bf16 for bf16, gemm_nn otherwise.
inline GemmFunction gemm_for(DType dtype) { return dtype == DType::bf16 ? gemm_bf16 : gemm_nn; }

// exp2 for a contiguous run (n a multiple of kTileColumnMultiple), accurate to
// about 1 ulp; arguments below -126.5 give exactly 0.
void exp2_inplace(float* x, int n);

// Forward online-softmax step for one row of scores (log2 units after
// `scale_log2`). Columns outside [visible_begin, visible_end) are masked.
// Updates the running max `row_max` (log2) and sum `row_sum`, overwrites
// `scores` with P = exp2(s - max) and returns the factor exp2(old_max -
// new_max) by which the caller rescales the row's accumulator.
float online_softmax_row(float* scores, int n, int visible_begin, int visible_end,
                         float scale_log2, float& row_max, float& row_sum);

// online_softmax_row for the packed bf16 GEMM (has_packed_bf16_gemm()): P
// goes, rounded to bf16, into `p`, one row of the P·V GEMM's packed A
// operand (n entries, then zeros up to packed_bf16_a_pitch(n)), and the
// scores stay. Its exp2 is accurate to 2^-18 relative, what a bf16 P keeps;
// row_sum sums P before its rounding, as online_softmax_row does.
float online_softmax_row_bf16(const float* scores, int n, int visible_begin, int visible_end,
                              float scale_log2, float& row_max, float& row_sum, std::uint16_t* p);

// Backward: P = exp2(s · scale_log2 - row_lse_log2) for one row of scores;
// masked columns (outside [visible_begin, visible_end)) get P = 0.
void probabilities_row(float* scores, int n, int visible_begin, int visible_end,
                       float scale_log2, float row_lse_log2);

// Backward, key-major tile (rows are keys, columns queries): P = exp2(s ·
// scale_log2 - column_lse_log2[c]), masked columns get 0.
void probabilities_row_by_column(float* scores, int n, int visible_begin, int visible_end,
                                 float scale_log2, const float* column_lse_log2);

// dS = P ∘ (dP - d) in place of dP, with d one value for the row
// (query-major tiles) ...
void score_gradient_row(const float* p, float* dp, int n, float row_d);
// ... or one value per column (key-major tiles).
void score_gradient_row_by_column(const float* p, float* dp, int n, const float* column_d);

// Σ x[i] · y[i] in a fixed order (n a multiple of kTileColumnMultiple).
float dot(const float* x, const float* y, int n);

// x[i] *= factor.
void scale_inplace(float* x, int n, float factor);

// dst[j, i] = src[i, j] for a 16 x 16 block (leading dimensions lds, ldd).
void transpose_16x16(const float* src, int lds, float* dst, int ldd);

}  // namespace flashgen::cpu
