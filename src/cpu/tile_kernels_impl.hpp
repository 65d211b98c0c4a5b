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

#include "cpu/tile_vector_impl.hpp"

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

#include "cpu/tile_softmax_impl.hpp"

float online_softmax_row(float* scores, int n, int visible_begin, int visible_end,
                         float scale_log2, float& row_max, float& row_sum) {
  struct OverScores {
    float* scores;
    void operator()(int j, const Vec& p0, const Vec& p1) const {
      store(scores + j, p0);
      store(scores + j + kLanes, p1);
    }
    void operator()(int j, const Vec& p0) const { store(scores + j, p0); }
  };
  return online_softmax_step<kExp2Degree>(scores, n, visible_begin, visible_end, scale_log2,
                                          row_max, row_sum, OverScores{scores});
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
