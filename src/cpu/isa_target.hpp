// Compiles the functions between FLASHGEN_ISA_TARGET_BEGIN("avx2,fma") and
// FLASHGEN_ISA_TARGET_END for the named instruction sets (GCC and Clang),
// while the rest of the file keeps the build's baseline: a kernel file
// probes the CPU in baseline code and calls the targeted code only where the
// CPU runs it. (tile_kernels.hpp says why whole files, not target_clones.)
#pragma once

#define FLASHGEN_PRAGMA(text) _Pragma(#text)
#if defined(__clang__)
#define FLASHGEN_ISA_TARGET_BEGIN(isa) \
  FLASHGEN_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define FLASHGEN_ISA_TARGET_END FLASHGEN_PRAGMA(clang attribute pop)
#else
#define FLASHGEN_ISA_TARGET_BEGIN(isa) \
  FLASHGEN_PRAGMA(GCC push_options) FLASHGEN_PRAGMA(GCC target(isa))
#define FLASHGEN_ISA_TARGET_END FLASHGEN_PRAGMA(GCC pop_options)
#endif
