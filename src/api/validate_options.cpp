// The rules of Options on their own, before any tensor is looked at. The
// per-head vectors' shapes, memory and overlap are checked with the tensors
// (validate.cpp).
#include <cmath>

#include "api/operands.hpp"
#include "api/validate.hpp"

namespace flashgen::api {
namespace {

bool is_valid(CausalAlignment alignment) {
  const int value = static_cast<int>(alignment);
  return value == static_cast<int>(CausalAlignment::bottom_right) ||
         value == static_cast<int>(CausalAlignment::top_left);
}

void check_window_side(const char* name, std::int64_t value) {
  if (value < -1)
    fail("options.%s (%lld) must be >= -1 (-1 = unbounded, 0 = no key on that side of the "
         "diagonal)",
         name, static_cast<long long>(value));
}

void check_rank(const char* name, const HeadVectorView& view, int max_rank, const char* shapes) {
  if (view.given() && (view.rank < 1 || view.rank > max_rank))
    fail("options.%s.rank (%d) must be %s", name, view.rank, shapes);
}

}  // namespace

void check_options(const Options& options) {
  if (!is_valid(options.backend))
    fail("options.backend (%d) is not a valid Backend (automatic = 0, cuda = 1, cpu = 2)",
         static_cast<int>(options.backend));
  if (options.scale.has_value() && (!std::isfinite(*options.scale) || *options.scale == 0.0))
    fail("options.scale (%g) must be finite and non-zero", *options.scale);
  if (options.cpu_threads < 0)
    fail("options.cpu_threads (%d) must be >= 0 (0 = all hardware threads)", options.cpu_threads);
  if (!is_valid(options.causal_alignment))
    fail("options.causal_alignment (%d) is not a valid CausalAlignment (bottom_right = 0: query "
         "i sees keys j <= i + seq_kv - seq_q; top_left = 1: keys j <= i)",
         static_cast<int>(options.causal_alignment));
  check_window_side("window_left", options.window_left);
  check_window_side("window_right", options.window_right);
  if (!std::isfinite(options.softcap) || options.softcap < 0.0)
    fail("options.softcap (%g) must be finite and >= 0 (0 = off; a negative cap is refused)",
         options.softcap);
  check_rank("alibi_slopes", options.alibi_slopes, 2, "1 ([heads_q]) or 2 ([batch, heads_q])");
  check_rank("sinks", options.sinks, 1, "1 ([heads_q])");
  check_rank("grad_sinks", options.grad_sinks, 1, "1 ([heads_q])");
}

}  // namespace flashgen::api
