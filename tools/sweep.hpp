// The head-dimension sweep of the benchmark, the tuner and the precompiler:
// D = 4..96 step 4, 104..160 step 8, 176..256 step 16, 288..384 step 32, and
// the odd or large extras 127, 199, 257, 385, 448, 512 (sorted, unique).
#pragma once

#include <cstdint>
#include <vector>

namespace flashgen::cli {

std::vector<std::int64_t> sweep_dims();

}  // namespace flashgen::cli
