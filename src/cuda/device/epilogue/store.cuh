// Epilogue stores: a warp's fp32 accumulators to the caller's tensors in the
// element type, guarded at the sequence end and the head dimension.
#pragma once

#include "common.cuh"
#include "params.cuh"

namespace flashgen_device {

// Calls store_row(rt, h, row, t) for each row a lane holds of a warp's
// accumulator tile (C layout: rows 16·rt + {g, g+8}, columns 2t + {0, 1} of
// each n-tile; g = lane / 4, t = lane % 4) that is below `valid_rows`: the
// row loop of the stores below.
template <int kRowTiles, class StoreRow>
__device__ __forceinline__ void for_each_held_row(int valid_rows, int lane, StoreRow&& store_row) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = rt * 16 + g + 8 * h;
      if (row < valid_rows) store_row(rt, h, row, t);
    }
  }
}

// Writes a warp's fp32 accumulator tile [kRowTiles][kNTiles][4] (C layout)
// to a strided global matrix in the element type, times `scale`: rows
// row0 + 16·rt + {g, g+8} (first `valid_rows` only), columns col0 + 8·nt +
// 2t + {0, 1} (first `valid_cols` only). With kVec >= 2 the rows are 4-byte
// aligned and the dim stride is 1, so pairs go out as one 32-bit store
// (kVec 1 rows are contiguous too, but only 2-byte aligned). `shift`: the
// tile's column of the output's first (token-row tiles; a multiple of kVec),
// the columns before it not stored.
template <int E, int kVec, int kRowTiles, int kNTiles>
__device__ __forceinline__ void store_acc_tile(u16* global, index_t row_stride, index_t col_stride,
                                               const float (&acc)[kRowTiles][kNTiles][4],
                                               const float (&row_scale)[kRowTiles][2],
                                               int valid_rows, int valid_cols, int lane,
                                               int shift = 0) {
  for_each_held_row<kRowTiles>(valid_rows, lane, [&](int rt, int h, int row, int t) {
    u16* out = global + row * row_stride;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const int col = nt * 8 + 2 * t - shift;  // of the output
      const float x0 = acc[rt][nt][2 * h] * row_scale[rt][h];
      const float x1 = acc[rt][nt][2 * h + 1] * row_scale[rt][h];
      if (kVec >= 2 && col >= 0 && col + 1 < valid_cols) {
        *reinterpret_cast<u32*>(out + col) = pack2<E>(x0, x1);
      } else {
        if (col >= 0 && col < valid_cols) out[col * col_stride] = from_float<E>(x0);
        if (col + 1 >= 0 && col + 1 < valid_cols) out[(col + 1) * col_stride] = from_float<E>(x1);
      }
    }
  });
}

// The same for one batch and head of a [batch, seq, heads, dim] tensor:
// rows row0 on, columns col0 on (a head chunk's or a warpgroup's half).
template <int E, int kVec, int kRowTiles, int kNTiles>
__device__ __forceinline__ void store_rows(const TensorArg& t, int batch, int head, int row0,
                                           int col0, const float (&acc)[kRowTiles][kNTiles][4],
                                           const float (&row_scale)[kRowTiles][2],
                                           int valid_rows, int valid_cols, int lane,
                                           int shift = 0) {
  store_acc_tile<E, kVec>(
      head_slice<u16>(t, batch, head) + row0 * t.stride_seq + col0 * t.stride_dim, t.stride_seq,
      t.stride_dim, acc, row_scale, valid_rows, valid_cols, lane, shift);
}

// The same with every row times one factor: the gradients dQ and dK carry
// the softmax scale (the kernels accumulate dS without it), dV none.
template <int E, int kVec, int kRowTiles, int kNTiles>
__device__ __forceinline__ void store_rows_times(const TensorArg& t, int batch, int head, int row0,
                                                 int col0,
                                                 const float (&acc)[kRowTiles][kNTiles][4],
                                                 float factor, int valid_rows, int valid_cols,
                                                 int lane, int shift = 0) {
  float row_scale[kRowTiles][2];
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) row_scale[rt][0] = row_scale[rt][1] = factor;
  store_rows<E, kVec>(t, batch, head, row0, col0, acc, row_scale, valid_rows, valid_cols, lane,
                      shift);
}

// The same for the columns of a tile from its column tile_col0 on (a
// warpgroup's half of the head dims, split=dims), whose column `shift` is
// the output's first (token-row tiles; 0 elsewhere): `cols` columns in all.
template <int E, int kVec, int kRowTiles, int kNTiles>
__device__ __forceinline__ void store_tile_columns_times(
    const TensorArg& t, int batch, int head, int row0, int tile_col0,
    const float (&acc)[kRowTiles][kNTiles][4], float factor, int valid_rows, int cols, int lane,
    int shift) {
  const int first = max_of(tile_col0 - shift, 0);  // the output's first column stored here
  store_rows_times<E, kVec>(t, batch, head, row0, first, acc, factor, valid_rows, cols - first,
                            lane, first - tile_col0 + shift);
}

// The forward's LSE of a warp's rows from row0 (natural log; rows past the
// sequence end are not written): the first lane of each quad holds its
// two rows' values per row tile.
template <int kRowTiles>
__device__ __forceinline__ void store_lse_rows(const AttentionParams& p, int batch, int head,
                                               int row0, const float (&lse)[kRowTiles][2],
                                               int lane) {
  if (p.lse.data == nullptr || (lane & 3) != 0) return;
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + rt * 16 + (lane >> 2) + 8 * h;
      if (row < p.seq_q)
        p.lse.data[batch * p.lse.stride_batch + head * p.lse.stride_heads +
                   row * p.lse.stride_seq] = lse[rt][h];
    }
}

// Row (split, batch, head, row) of the split-key forward's packed partial
// results (AttentionParams::partial_o, partial_lse).
__device__ __forceinline__ index_t partial_row(const AttentionParams& p, int split, int batch,
                                               int head, int row) {
  return ((static_cast<index_t>(split) * p.batch + batch) * p.heads_q + head) * p.seq_q + row;
}

// A warp's fp32 accumulator tile times `row_scale` into the partial O of its
// share of the keys, rows row0 on, columns col0 on (as store_acc_tile; fp32,
// element by element: rows of odd dim_v are not 8-byte aligned).
template <int kRowTiles, int kNTiles>
__device__ __forceinline__ void store_partial_rows(const AttentionParams& p, int split, int batch,
                                                   int head, int row0, int col0,
                                                   const float (&acc)[kRowTiles][kNTiles][4],
                                                   const float (&row_scale)[kRowTiles][2],
                                                   int valid_rows, int valid_cols, int lane) {
  for_each_held_row<kRowTiles>(valid_rows, lane, [&](int rt, int h, int row, int t) {
    float* out = p.partial_o + partial_row(p, split, batch, head, row0 + row) * p.dim_v + col0;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const int col = nt * 8 + 2 * t;
      if (col < valid_cols) out[col] = acc[rt][nt][2 * h] * row_scale[rt][h];
      if (col + 1 < valid_cols) out[col + 1] = acc[rt][nt][2 * h + 1] * row_scale[rt][h];
    }
  });
}

// The LSE of a warp's rows over its share of the keys (-inf where the share
// is empty), as store_lse_rows.
template <int kRowTiles>
__device__ __forceinline__ void store_partial_lse_rows(const AttentionParams& p, int split,
                                                       int batch, int head, int row0,
                                                       const float (&lse)[kRowTiles][2],
                                                       int lane) {
  if ((lane & 3) != 0) return;
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + rt * 16 + (lane >> 2) + 8 * h;
      if (row < p.seq_q) p.partial_lse[partial_row(p, split, batch, head, row)] = lse[rt][h];
    }
}

}  // namespace flashgen_device
