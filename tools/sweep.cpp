#include "sweep.hpp"

#include <set>

namespace flashgen::cli {

std::vector<std::int64_t> sweep_dims() {
  std::set<std::int64_t> dims;
  const struct { std::int64_t first, last, step; } ranges[] = {
      {4, 96, 4}, {104, 160, 8}, {176, 256, 16}, {288, 384, 32}};
  for (const auto& r : ranges)
    for (std::int64_t d = r.first; d <= r.last; d += r.step) dims.insert(d);
  for (std::int64_t d : {127, 199, 257, 385, 448, 512}) dims.insert(d);
  return {dims.begin(), dims.end()};
}

}  // namespace flashgen::cli
