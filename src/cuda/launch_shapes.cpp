#include "cuda/launch_shapes.hpp"

#include <algorithm>
#include <string>

#include "codegen/generate.hpp"
#include "codegen/kernel_families.hpp"

namespace flashgen::cuda {
namespace {

// The most blocks a launch takes along y.
constexpr std::int64_t kGridYLimit = 65535;

unsigned to_unsigned(std::int64_t x) { return static_cast<unsigned>(x); }

}  // namespace

LaunchShape block_grid(const KernelChoice& c, std::int64_t rows, std::int64_t heads,
                       std::int64_t batch, std::int64_t shares) {
  LaunchShape shape;
  const bool row_kernel = is_row_kernel(c.spec.kind);
  const std::int64_t block_rows = row_kernel ? c.generated->threads / 32 : c.tuning.block_rows;
  const std::int64_t chunks = row_kernel ? 1 : head_chunks_of(c.spec, c.tuning);
  const std::int64_t row_blocks = (rows + block_rows - 1) / block_rows * shares;
  // Chunks of the head dims (and the key/value kernel's dV and dK CTAs of
  // one key block) run along z. A causal tile kernel takes its heads along
  // x and its row blocks along y, so that its CTAs start heaviest row block
  // first (tile_cell in device/scheduler/cta_tile.cuh).
  const bool by_heads = c.spec.causal && !row_kernel;
  if (by_heads && row_blocks > kGridYLimit)
    throw Error(ErrorCode::unsupported,
                "causal attention over " + std::to_string(rows) + " rows takes " +
                    std::to_string(row_blocks) + " blocks of " + std::to_string(block_rows) +
                    " rows, more than the " + std::to_string(kGridYLimit) +
                    " a launch holds; split the query rows over calls");
  shape.grid[0] = to_unsigned(by_heads ? heads : row_blocks);
  shape.grid[1] = to_unsigned(by_heads ? row_blocks : heads);
  shape.grid[2] = to_unsigned(batch * chunks);
  shape.block[0] = static_cast<unsigned>(c.generated->threads);
  shape.dynamic_shared_bytes = c.generated->shared_bytes;
  return shape;
}

bool launches_nothing(const LaunchShape& shape) {
  return shape.grid[0] == 0 || shape.grid[1] == 0 || shape.grid[2] == 0;
}

LaunchShape walking_shape(const LaunchShape& grid, flashgen_device::AttentionParams& params,
                          int sm_count) {
  const std::uint64_t tiles =
      std::uint64_t(grid.grid[0]) * std::uint64_t(grid.grid[1]) * std::uint64_t(grid.grid[2]);
  // The walk numbers its tiles in 32 bits and looks up to two passes (of a
  // tile per CTA) past the last (walk_step_tile).
  const std::uint64_t most_tiles = std::uint64_t(0xffffffffu) - 2 * std::uint64_t(sm_count);
  if (tiles > most_tiles)
    throw Error(ErrorCode::unsupported,
                std::to_string(tiles) + " tiles are more than a persistent forward counts (" +
                    std::to_string(most_tiles) + "); split the batch over calls");
  params.tile_grid_x = grid.grid[0];
  params.tile_grid_y = grid.grid[1];
  params.tile_count = static_cast<unsigned>(tiles);
  LaunchShape shape = grid;
  shape.grid[0] = static_cast<unsigned>(std::min<std::uint64_t>(tiles, std::uint64_t(sm_count)));
  shape.grid[1] = shape.grid[2] = 1;
  return shape;
}

}  // namespace flashgen::cuda
