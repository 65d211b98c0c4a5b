// The tile kernels for the target's baseline instruction set.
#include <cstdint>

#include "cpu/tile_kernels.hpp"
#include "cpu/tile_math.hpp"

// 8-float vectors are returned only from always-inlined helpers; the warning
// that 32-byte vectors change the calling convention without AVX is moot.
#pragma GCC diagnostic ignored "-Wpsabi"

#define FLASHGEN_TILE_KERNELS_NAME "generic"
#include "cpu/tile_kernels_impl.hpp"

namespace flashgen::cpu {

const TileKernels& generic_tile_kernels() { return isa_kernels::kIsaTileKernels; }

}  // namespace flashgen::cpu
