#include "codegen/persistent_tiles.hpp"

#include <algorithm>

#include "codegen/generate.hpp"

namespace flashgen {

TuningParams with_persistent_tiles(const KernelSpec& spec, const TuningParams& tuning,
                                   std::size_t shared_limit) {
  const bool applies = spec.kind == KernelKind::forward && spec.dtype != DType::f32 &&
                       !spec.split_keys && tuning.wgmma && tuning.producer && tuning.tma &&
                       tuning.split == WarpgroupSplit::rows && spec.vec == 8 &&
                       head_chunks_of(spec, tuning) == 1;
  if (!applies) return tuning;
  TuningParams walked = tuning;
  walked.persistent = true;
  return shared_bytes(spec, walked) <= shared_limit ? walked : tuning;
}

std::int64_t keys_per_query_block(const Problem& p, std::int64_t rows) {
  const std::int64_t longer = std::max(p.seq_q, p.seq_kv);
  const bool right_bounded = p.window_right >= 0 || p.causal;
  if (p.window_left < 0 || !right_bounded) return longer;
  return std::min(longer, p.window_left + std::max<std::int64_t>(0, p.window_right) + rows);
}

TuningParams walking_where_faster(const KernelSpec& spec, const Problem& p,
                                  const TuningParams& tuning, std::size_t shared_limit) {
  if (keys_per_query_block(p, tuning.block_rows) > kWalkMostKeys) return tuning;
  return with_persistent_tiles(spec, tuning, shared_limit);
}

}  // namespace flashgen
