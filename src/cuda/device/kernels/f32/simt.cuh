// What the fp32 kernels share. fp32 inputs run on the CUDA cores in fp32
// (no tensor cores, no conversion), so their results meet the fp32
// correctness rule; they are the slow, exact path for f32 tensors.
//
// Layout of the work: a warp owns 8 rows of the CTA's block; a traversed
// block has 32 rows, one per lane. A lane computes the 8 scores of its
// traversed row against the warp's rows; the products with the traversed
// tile (P·V, dS·K, Pᵀ·dO, dSᵀ·Q) pass each lane's value to the others with
// shuffles, and a lane accumulates output columns lane, lane + 32, ...
#pragma once

#include "common.cuh"
#include "softmax/mask.cuh"
#include "softmax/row_stats.cuh"

namespace flashgen_device {

constexpr int kSimtRowsPerWarp = 8;
constexpr int kSimtBlockN = 32;  // traversed rows: one per lane

// Output columns a CTA owns when `chunks` CTAs split `dim`: a multiple of 32
// (a lane's columns are lane + 32·c).
constexpr __device__ __host__ int simt_chunk(int dim, int chunks) {
  return round_up(ceil_div(dim, chunks), 32);
}

// Row stride of a traversed tile read one row per lane: odd, so the 32
// lanes' words fall in 32 distinct banks.
constexpr __device__ __host__ int odd_stride(int cols) { return cols % 2 == 1 ? cols : cols + 1; }

// [kRows][kCols] from global (any strides) into shared memory with row
// stride kStride; elements past valid_rows or valid_cols are zero.
template <int kRows, int kCols, int kStride, int kThreads>
__device__ __forceinline__ void load_f32_tile(float* dst, const float* src, index_t stride_seq,
                                              index_t stride_dim, int valid_rows, int valid_cols,
                                              int thread) {
  for (int i = thread; i < kRows * kCols; i += kThreads) {
    const int r = i / kCols, c = i % kCols;
    dst[r * kStride + c] =
        r < valid_rows && c < valid_cols ? src[r * stride_seq + c * stride_dim] : 0.0f;
  }
}

// A warp's accumulators of 8 rows by kColumns / 32 columns per lane, to 0.
template <int kColumns>
__device__ __forceinline__ void zero_rows(float (&acc)[kSimtRowsPerWarp][kColumns / 32]) {
#pragma unroll
  for (int r = 0; r < kSimtRowsPerWarp; ++r)
#pragma unroll
    for (int c = 0; c < kColumns / 32; ++c) acc[r][c] = 0.0f;
}

// Row width of the tiles a warp's rows live in: a multiple of 4 floats, so
// they are read 16 bytes at a time (zero past the tensor's columns).
constexpr __device__ __host__ int simt_row_width(int cols) { return round_up(cols, 4); }

// The 8 dot products of a warp's rows (16-byte aligned, row stride
// kRowStride) with this lane's traversed row (`mine`), over kDim columns (a
// multiple of 4). The rows are read 4 floats at a time (the same address
// across the warp, one broadcast), the traversed row one float at a time.
template <int kDim, int kRowStride>
__device__ __forceinline__ void dot_rows(float (&out)[kSimtRowsPerWarp], const float* rows,
                                         const float* mine) {
  static_assert(kDim % 4 == 0 && kRowStride % 4 == 0, "rows are read as float4");
#pragma unroll
  for (int r = 0; r < kSimtRowsPerWarp; ++r) out[r] = 0.0f;
  for (int d = 0; d < kDim; d += 4) {
    const float x0 = mine[d], x1 = mine[d + 1], x2 = mine[d + 2], x3 = mine[d + 3];
#pragma unroll
    for (int r = 0; r < kSimtRowsPerWarp; ++r) {
      const float4 q = *reinterpret_cast<const float4*>(rows + r * kRowStride + d);
      out[r] = fmaf(q.x, x0, out[r]);
      out[r] = fmaf(q.y, x1, out[r]);
      out[r] = fmaf(q.z, x2, out[r]);
      out[r] = fmaf(q.w, x3, out[r]);
    }
  }
}

// acc[r][c] += Σ_j weight_j[r] · tile[j][lane + 32c], weight_j the value of
// lane j: the product of the warp's 8 x 32 weights with a [32][kCols] tile.
template <int kCols, int kStride>
__device__ __forceinline__ void accumulate_product(float (&acc)[kSimtRowsPerWarp][kCols / 32],
                                                   const float (&weight)[kSimtRowsPerWarp],
                                                   const float* tile, int lane) {
  for (int j = 0; j < kSimtBlockN; ++j) {
    float x[kCols / 32];
#pragma unroll
    for (int c = 0; c < kCols / 32; ++c) x[c] = tile[j * kStride + lane + 32 * c];
#pragma unroll
    for (int r = 0; r < kSimtRowsPerWarp; ++r) {
      const float w = __shfl_sync(0xffffffffu, weight[r], j);
#pragma unroll
      for (int c = 0; c < kCols / 32; ++c) acc[r][c] += w * x[c];
    }
  }
}

// Writes factor · acc of the warp's rows [row0, row0 + 8) and the columns
// col0 + lane + 32c of `out` (a [seq][dim] view at the CTA's batch and head)
// that exist.
template <int kCols>
__device__ __forceinline__ void store_rows(float* out, index_t stride_seq, index_t stride_dim,
                                           const float (&acc)[kSimtRowsPerWarp][kCols / 32],
                                           const float (&factor)[kSimtRowsPerWarp], int row0,
                                           int rows, int col0, int cols, int lane) {
#pragma unroll
  for (int r = 0; r < kSimtRowsPerWarp; ++r) {
    if (row0 + r >= rows) continue;
#pragma unroll
    for (int c = 0; c < kCols / 32; ++c) {
      const int col = col0 + lane + 32 * c;
      if (col < cols) out[(row0 + r) * stride_seq + col * stride_dim] = acc[r][c] * factor[r];
    }
  }
}

// stage_rows() (softmax/row_stats.cuh) for fp32 dO and O.
template <int kDimV, int kRows, int kWarps>
__device__ __forceinline__ void stage_query_rows_f32(const AttentionParams& p, int batch, int head,
                                                     int row0, float* dterm_shared,
                                                     float* l2_shared, bool write_global,
                                                     int warp, int lane) {
  const float* grad_o = head_slice<const float>(p.grad_o, batch, head);
  const float* o = head_slice<const float>(p.o, batch, head);
  stage_rows<kRows, kWarps>(p, batch, head, row0, dterm_shared, l2_shared, write_global, warp,
                            lane, [&](int r) {
                              const int row = row0 + r;
                              float sum = 0.0f;
                              for (int c = lane; c < kDimV; c += 32)
                                sum += grad_o[row * p.grad_o.stride_seq + c * p.grad_o.stride_dim] *
                                       o[row * p.o.stride_seq + c * p.o.stride_dim];
                              return warp_sum(sum);
                            });
}

// Whether query `query` of (batch, head) sees key `key`: both inside their
// sequences, left by the diagonals and attended by the user mask.
template <class C>
__device__ __forceinline__ bool visible(const AttentionParams& p, int batch, int head, int query,
                                        int key) {
  if (query >= p.seq_q || is_masked<C>(p, query, key)) return false;
  if constexpr (C::kMask) return user_attends<C>(p, batch, head, query, key);
  return true;
}

}  // namespace flashgen_device
