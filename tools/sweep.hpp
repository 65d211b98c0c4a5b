// The head-dimension sweep of the benchmark, the tuner and the precompiler:
// D = 4..96 step 4, 104..160 step 8, 176..256 step 16, 288..384 step 32, and
// the odd or large extras 127, 199, 257, 385, 448, 512 (sorted, unique).
#pragma once

#include <cstdint>
#include <vector>

namespace flashgen::cli {

class Arguments;

std::vector<std::int64_t> sweep_dims();

// Declares --dims D,D,... and --sweep on a command.
void declare_dims_options(Arguments& a);
// The head dimensions asked for: the sweep, the --dims list (each in
// 1..max_dim) or `fallback`; both options at once is a usage error.
std::vector<std::int64_t> dims_from(const Arguments& a, const std::vector<std::int64_t>& fallback,
                                    std::int64_t max_dim);

}  // namespace flashgen::cli
