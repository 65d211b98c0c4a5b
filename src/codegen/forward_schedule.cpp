#include "codegen/forward_schedule.hpp"

#include <algorithm>

#include "codegen/generate.hpp"

namespace flashgen {

std::string walk_refused(const KernelSpec& spec, const TuningParams& tuning) {
  // (A split-key forward takes no mma=wgmma: check_tuning's rule of its own.)
  if (spec.kind != KernelKind::forward || spec.dtype == DType::f32 || !tuning.wgmma ||
      !tuning.producer || !tuning.tma || tuning.split != WarpgroupSplit::rows || spec.vec != 8)
    return "schedule=persistent applies to the wgmma forward with producer=warp and copy=tma on "
           "16-byte aligned rows (alignment class 8)";
  if (head_chunks_of(spec, tuning) != 1)
    return "schedule=persistent needs all value columns in one CTA (head = 0)";
  if (spec.varlen)
    return "schedule=persistent walks the tiles of one problem, not those of packed sequences";
  return "";
}

TuningParams with_persistent_tiles(const KernelSpec& spec, const TuningParams& tuning,
                                   std::size_t shared_limit) {
  if (spec.split_keys || !walk_refused(spec, tuning).empty()) return tuning;
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

std::string turns_refused(const KernelSpec& spec, const TuningParams& tuning) {
  if (spec.kind != KernelKind::forward || spec.dtype == DType::f32 || spec.split_keys ||
      !tuning.wgmma || !tuning.producer || tuning.split != WarpgroupSplit::rows ||
      tuning.warps < 8)
    return "pingpong=1 applies to the wgmma forward with producer=warp and two or more "
           "computing warpgroups (warps >= 8)";
  return "";
}

TuningParams with_gemm_turns(const KernelSpec& spec, const TuningParams& tuning) {
  if (!turns_refused(spec, tuning).empty()) return tuning;
  TuningParams turns = tuning;
  turns.pingpong = true;
  return turns;
}

TuningParams query_blocks_for_window(const KernelSpec& spec, const Problem& p,
                                     const TuningParams& tuning, std::size_t shared_limit) {
  constexpr int kRows = 64;
  const bool narrow_window = keys_per_query_block(p, kRows) < std::max(p.seq_q, p.seq_kv) &&
                             keys_per_query_block(p, tuning.block_rows) <= kWalkMostKeys;
  if (spec.dtype == DType::f32 || spec.split_keys || !narrow_window) return tuning;
  const int widest = std::max(spec.dim_qk, spec.dim_v);
  TuningParams blocks;  // mma.sync, one stage
  blocks.block_rows = kRows;
  blocks.warps = 4;
  if (spec.kind == KernelKind::backward_query && widest <= 128) {
    blocks.block_cols = 32;  // no operand cached
  } else if (spec.kind == KernelKind::forward && widest <= 64) {
    blocks.block_cols = 64;
    blocks.cached = kCacheQ;
  } else {
    return tuning;
  }
  return tuning_fits(spec, blocks, shared_limit) ? blocks : tuning;
}

TuningParams scheduled_as_run(const KernelSpec& spec, const Problem& p,
                              const TuningParams& tuning, std::size_t shared_limit) {
  return query_blocks_for_window(
      spec, p, with_gemm_turns(spec, walking_where_faster(spec, p, tuning, shared_limit)),
      shared_limit);
}

}  // namespace flashgen
