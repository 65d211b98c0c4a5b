// The tile kernels compiled for AVX2 + FMA (x86-64 only): twice the vector
// width of the SSE2 baseline and fused multiply-adds. Only the kernels get
// the target; avx2_tile_kernels() itself runs on any CPU.
#include <cstdint>

#include "cpu/isa_target.hpp"
#include "cpu/tile_kernels.hpp"
#include "cpu/tile_math.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#define FLASHGEN_HAS_AVX2_KERNELS 1

FLASHGEN_ISA_TARGET_BEGIN("avx2,fma")

#define FLASHGEN_TILE_KERNELS_NAME "avx2"
#include "cpu/tile_kernels_impl.hpp"

FLASHGEN_ISA_TARGET_END

#endif

namespace flashgen::cpu {

const TileKernels* avx2_tile_kernels() {
#if defined(FLASHGEN_HAS_AVX2_KERNELS)
  __builtin_cpu_init();  // idempotent; needed if called before static constructors ran
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return &isa_kernels::kIsaTileKernels;
  }
#endif
  return nullptr;
}

}  // namespace flashgen::cpu
