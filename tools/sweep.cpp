#include "sweep.hpp"

#include <set>

#include "arguments.hpp"

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

void declare_dims_options(Arguments& a) {
  a.option("dims", "D,D,...", "head dimensions (Dqk = Dv = D)");
  a.flag("sweep", "D = 4..96/4, 104..160/8, 176..256/16, 288..384/32, 127 199 257 385 448 512");
}

std::vector<std::int64_t> dims_from(const Arguments& a, const std::vector<std::int64_t>& fallback,
                                    std::int64_t max_dim) {
  if (a.given("sweep") && a.given("dims")) throw UsageError("--dims and --sweep: give one of them, not both");
  return a.given("sweep") ? sweep_dims() : a.integer_list("dims", fallback, 1, max_dim);
}

}  // namespace flashgen::cli
