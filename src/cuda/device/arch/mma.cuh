// Tensor-core building blocks for sm_80+: ldmatrix and mma.sync m16n8k16 with
// fp32 accumulation. Fragment layouts (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
//   A 16x16 (4 regs): a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 8+2t..) a3 (g+8, 8+2t..)
//   B 16x8  (2 regs): b0 (k = 2t..2t+1, n = g)  b1 (k = 8+2t.., n = g)
//   C 16x8  (4 f32):  c0 c1 (g, 2t..2t+1)  c2 c3 (g+8, 2t..2t+1)
#pragma once

#include "common.cuh"

namespace flashgen_device {

// Four 8x8 b16 matrices; lane l gives the address of row (l % 8) of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The same, each matrix transposed on the way (for B operands stored k-major).
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], u32 address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// D = A·B + D for one 16x8x16 tile.
template <int E>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  if (E == kBF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// The row address a lane gives ldmatrix for the 16x16 block at `tile` (row
// stride in elements) whose four 8x8 matrices stand row by row (matrix i at
// rows (i / 2) * 8, columns (i % 2) * 8) or column by column (rows
// (i % 2) * 8, columns (i / 2) * 8).
template <bool kColumnByColumn>
__device__ __forceinline__ u32 x4_row_address(const u16* tile, int row_stride, int lane) {
  const int matrix = lane >> 3;
  const int row_half = kColumnByColumn ? matrix & 1 : matrix >> 1;
  const int column_half = kColumnByColumn ? matrix >> 1 : matrix & 1;
  return shared_address(tile + (row_half * 8 + (lane & 7)) * row_stride + column_half * 8);
}

// A 16x16 A-fragment of a row-major shared tile (row stride in elements),
// whose top-left element is at `tile`.
__device__ __forceinline__ void load_a_fragment(u32 (&a)[4], const u16* tile, int row_stride,
                                                int lane) {
  // Matrices: 0 = rows 0-7 cols 0-7, 1 = rows 8-15, 2 = rows 0-7 cols 8-15, 3 = rows 8-15 cols 8-15.
  const u16* p = tile + (lane & 15) * row_stride + (lane >> 4) * 8;
  ldmatrix_x4(a, shared_address(p));
}

// B-fragments for two adjacent n-tiles (16 n x 16 k) from a shared tile stored
// n-major ([n][k], row stride in elements): b[0..1] for n 0-7, b[2..3] for n 8-15.
__device__ __forceinline__ void load_b_fragments_nk(u32 (&b)[4], const u16* tile, int row_stride,
                                                    int lane) {
  ldmatrix_x4(b, x4_row_address<false>(tile, row_stride, lane));
}

// B-fragments for two adjacent n-tiles from a shared tile stored k-major
// ([k][n], row stride in elements), transposed by ldmatrix: same output order.
__device__ __forceinline__ void load_b_fragments_kn(u32 (&b)[4], const u16* tile, int row_stride,
                                                    int lane) {
  ldmatrix_x4_trans(b, x4_row_address<true>(tile, row_stride, lane));
}

// A-fragments of a 16x16 tile stored k-major ([k][m], row stride in elements),
// transposed by ldmatrix (for operands such as Pᵀ kept as P in shared memory):
// stored transposed, matrix i starts at row k = (i / 2) * 8, column m = (i % 2) * 8.
__device__ __forceinline__ void load_a_fragment_km(u32 (&a)[4], const u16* tile, int row_stride,
                                                   int lane) {
  ldmatrix_x4_trans(a, x4_row_address<false>(tile, row_stride, lane));
}

}  // namespace flashgen_device
