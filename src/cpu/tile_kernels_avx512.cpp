// The tile kernels compiled for AVX-512 (F, BW, VL, DQ; x86-64 only):
// 16-lane vectors and 32 registers, which hold a 4 x 64 GEMM block.
#include <cstdint>

#include "cpu/isa_target.hpp"
#include "cpu/tile_kernels.hpp"
#include "cpu/tile_math.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#define FLASHGEN_HAS_AVX512_KERNELS 1
#include <immintrin.h>
// GCC 12 reports the pass-through operand the intrinsics fill with
// _mm512_undefined_ps() as uninitialized (a false positive of GCC 12).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

FLASHGEN_ISA_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq")

#define FLASHGEN_TILE_KERNELS_NAME "avx512"
#define FLASHGEN_TILE_VECTOR_LANES 16
#include "cpu/tile_kernels_impl.hpp"

FLASHGEN_ISA_TARGET_END

#endif

namespace flashgen::cpu {

const TileKernels* avx512_tile_kernels() {
#if defined(FLASHGEN_HAS_AVX512_KERNELS)
  __builtin_cpu_init();  // idempotent; needed if called before static constructors ran
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return &isa_kernels::kIsaTileKernels;
  }
#endif
  return nullptr;
}

}  // namespace flashgen::cpu
