// The tile kernels of tile_math.hpp compiled once per instruction set, as
// tables of functions; isa_dispatch.hpp says which table runs.
//
// Why separate translation units and not target_clones: helper functions on
// GCC vector types are lowered for the file's baseline target before they are
// inlined into a clone, so an AVX2 clone would still build its broadcasts
// from SSE inserts. A whole file compiled for AVX2 has no such seam.
#pragma once

#include <cstdint>

namespace flashgen::cpu {

struct TileKernels {
  const char* name;  // "generic", "avx2", "avx512", ... (what FLASHGEN_CPU_ISA takes)
  void (*gemm_nn)(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                  float* c, int ldc, bool accumulate);
  void (*exp2_inplace)(float* x, int n);
  float (*online_softmax_row)(float* scores, int n, int visible_begin, int visible_end,
                              float scale_log2, float& row_max, float& row_sum);
  void (*probabilities_row)(float* scores, int n, int visible_begin, int visible_end,
                            float scale_log2, float row_lse_log2);
  void (*probabilities_row_by_column)(float* scores, int n, int visible_begin, int visible_end,
                                      float scale_log2, const float* column_lse_log2);
  void (*score_gradient_row)(const float* p, float* dp, int n, float row_d);
  void (*score_gradient_row_by_column)(const float* p, float* dp, int n, const float* column_d);
  float (*dot)(const float* x, const float* y, int n);
  void (*scale_inplace)(float* x, int n, float factor);
  // dst[j, i] = src[i, j] for a 16 x 16 block (leading dimensions lds, ldd).
  void (*transpose_16x16)(const float* src, int lds, float* dst, int ldd);
  // gemm_nn with both operands rounded to bf16 (fp32 sums), for bf16 inputs;
  // null where the CPU has no bf16 dot product (gemm_nn serves instead).
  void (*gemm_bf16)(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                    int ldc, bool accumulate) = nullptr;
  // The same on operands rounded and packed once, for reuse across GEMMs
  // (tile_math.hpp: packed_bf16_a_elements); null with gemm_bf16.
  void (*pack_bf16_a)(int m, int k, const float* a, int lda, std::uint16_t* out) = nullptr;
  void (*pack_bf16_b)(int k, int n, const float* b, int ldb, std::uint16_t* out) = nullptr;
  void (*gemm_bf16_packed)(int m, int n, int k, const std::uint16_t* a, const std::uint16_t* b,
                           int b_pitch, float* c, int ldc, bool accumulate) = nullptr;
  // online_softmax_row with P rounded to bf16 into one row of the packed A
  // operand instead of over the scores (tile_math.hpp); null with gemm_bf16.
  float (*online_softmax_row_bf16)(const float* scores, int n, int visible_begin, int visible_end,
                                   float scale_log2, float& row_max, float& row_sum,
                                   std::uint16_t* p) = nullptr;
};

// Compiled for the target's baseline; runs everywhere.
const TileKernels& generic_tile_kernels();
// Compiled for AVX2 + FMA on x86-64; null elsewhere or when the CPU lacks them.
const TileKernels* avx2_tile_kernels();
// Compiled for AVX-512 F/BW/VL/DQ on x86-64; null elsewhere or when the CPU
// (or the OS, which must save the 512-bit state) lacks them.
const TileKernels* avx512_tile_kernels();
// The AVX-512 kernels with bf16 GEMMs on vdpbf16ps (AVX512-BF16), and on AMX
// tiles (AMX-BF16, where the OS grants the tile state); null where not runnable.
const TileKernels* avx512_bf16_tile_kernels();
const TileKernels* amx_tile_kernels();
// Whether this CPU's bf16 dot products do more multiply-adds per cycle than
// its fp32 FMAs: AMD's (Zen 4: one 16-lane vdpbf16ps, 32 products, per cycle
// against one 16-lane FMA); not Intel's, where both do 32 (docs/decisions.md).
// Ranks avx512_bf16 above avx512.
bool bf16_dot_outpaces_fma();
// Scratch for packed operands, one buffer per (thread, slot), at least
// `bytes` long and 64-byte aligned; valid until the thread's next call for
// the same slot.
void* tile_scratch(int slot, long bytes);
// What the backend runs (isa_dispatch.hpp says how it is chosen).
const TileKernels& active_tile_kernels();

}  // namespace flashgen::cpu
