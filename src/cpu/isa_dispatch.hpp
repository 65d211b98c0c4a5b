// Which tile kernels the CPU backend runs: the best instruction set this CPU
// and OS support, unless FLASHGEN_CPU_ISA names another one (generic, avx2,
// avx512, ...). A name that is unknown or not runnable here falls back to
// the best, with one line on stderr saying so.
#pragma once

#include <string>
#include <vector>

#include "cpu/tile_kernels.hpp"

namespace flashgen::cpu {

inline constexpr const char* kIsaEnvironmentVariable = "FLASHGEN_CPU_ISA";

// Every kernel table built here that this CPU runs, from the baseline to the
// best: generic, avx2, avx512 and avx512_bf16 (in the order
// bf16_dot_outpaces_fma() says), amx.
std::vector<const TileKernels*> runnable_tile_kernels();

// The runnable table called `name`, or null.
const TileKernels* runnable_tile_kernels_named(const std::string& name);

struct IsaChoice {
  const TileKernels* kernels = nullptr;
  std::string warning;  // non-empty when `requested` could not be honoured
};
// The table for a request (null or empty: the best).
IsaChoice choose_tile_kernels(const char* requested);

// Makes the backend run `kernels` from now on (tests run every table through
// the whole backend this way); not for use while a call is running.
void set_active_tile_kernels(const TileKernels& kernels);

}  // namespace flashgen::cpu
