// The grids the CUDA backend launches: a CTA per tile of the output (row
// blocks x heads x batch and head chunks, laid out as the device's
// tile_cell expects), or, for a persistent kernel, a CTA per SM walking
// those tiles.
#pragma once

#include <cstdint>

#include "cuda/device/params.cuh"
#include "cuda/kernel_choice.hpp"
#include "cuda/runtime/runtime.hpp"

namespace flashgen::cuda {

// Grid of a kernel that owns row blocks of `rows` rows over `heads` heads;
// `shares` CTAs per row block (the split-key forward's shares of the keys).
// Throws Error(unsupported) where a causal grid would take more row blocks
// than a launch holds along y.
LaunchShape block_grid(const KernelChoice& c, std::int64_t rows, std::int64_t heads,
                       std::int64_t batch, std::int64_t shares = 1);

// A grid with no CTA along some axis: nothing to launch (an empty grid is
// an invalid launch), as for problems without queries, keys or heads.
bool launches_nothing(const LaunchShape& shape);

// A persistent kernel (schedule=persistent) walks the tiles of `grid`, the
// grid a CTA per tile would have: its extents and count of tiles go to
// `params`, and it runs a CTA per SM (its registers and shared memory leave
// room for no second one), or one per tile where there are fewer.
LaunchShape walking_shape(const LaunchShape& grid, flashgen_device::AttentionParams& params,
                          int sm_count);

}  // namespace flashgen::cuda
