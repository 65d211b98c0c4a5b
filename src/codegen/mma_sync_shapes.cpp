#include "codegen/mma_sync_shapes.hpp"

namespace flashgen {
namespace {

// Forward. Each warp owns 16 · row_tiles query rows; its O accumulator holds
// row_tiles · head_block / 2 fp32 registers per thread and its scores
// row_tiles · cols / 2, so the register file (255 per thread) bounds
// row_tiles · (head_block + cols) at about 384.
//  - dims <= 64: 128 x 64 blocks, Q held in registers (16 registers per row tile per 64 of D).
//  - dims <= 128: 128 x 48 blocks with two row tiles per warp, as FlashAttention-2 does
//    (each K/V fragment read from shared memory feeds two MMAs); 48 rather than 64
//    columns keeps O (128) + S (48) registers clear of spills.
//  - larger: one row tile per warp; the value dimension is split into CTAs of at
//    most 256 columns (their scores are recomputed, the price of keeping O in registers).
TuningParams forward_tuning(const KernelSpec& spec) {
  const int widest = widest_dim(spec);
  TuningParams t;
  if (widest <= 64) {
    t = {128, 64, 0, 4, kCacheQ};
  } else if (widest <= 128) {
    t = {128, 48, 0, 4, 0};
  } else if (widest <= 256) {
    t = {64, 64, 0, 4, 0};
  } else {
    // 128 rows over 8 warps halve the K/V traffic per flop; one CTA per SM.
    t = {128, 32, 256, 8, 0};
  }
  return t;
}

// Query backward: the warp holds dQ (head_block / 2 registers per row tile)
// plus S and dP (cols / 2 each). Up to 128 columns, two row tiles per warp
// (the tuner's winners on the H200 at D = 32 to 128, and 223 against 164
// TFLOP/s of its GEMMs at D = 127, where 2-byte rows keep this kernel). To
// 352 columns all of dQ in registers, over 16-key blocks past 320: the
// tuner's winners at D = 257-352 on the H200 (268 / 226 / 216 against 138 /
// 88 / 91 for 256-column chunks at D = 288 / 320 / 352). Past that dQ is
// split across CTAs.
TuningParams backward_query_tuning(const KernelSpec& spec) {
  const int widest = widest_dim(spec);
  if (widest <= 64) return {128, 64, 0, 4, 0};
  if (widest <= 128) return {128, 32, 0, 4, 0};
  if (widest <= 320) return {64, 32, 0, 4, 0};
  if (widest <= 352) return {64, 16, 0, 4, 0};
  return {64, 32, 256, 4, 0};
}

// Key/value backward: the warp holds dK and dV (head_block / 2 registers each
// per row tile) plus Sᵀ and dPᵀ; shared memory holds K, V and the traversed
// Q, dO tiles at full width, which bounds cols for large D.
TuningParams backward_key_value_tuning(const KernelSpec& spec) {
  const int widest = widest_dim(spec);
  // Up to 32 columns, two row tiles per warp (+14-15% at D = 4 and 12).
  if (widest <= 32) return {128, 64, 0, 4, 0};
  // dK + dV take 128 registers at 128 columns; 64-key blocks still beat 48
  // there (205 against 191 TFLOP/s at D = 128, 196 against 188 at D = 127).
  if (widest <= 128) return {64, 64, 0, 4, 0};
  // To 176 columns, 64 keys over 4 warps holding all of dK and dV: the
  // tuner's choice at D = 136..176 (+15-61% over the shape below).
  if (widest <= 176) return {64, 48, 0, 4, 0};
  // Past that, 128 keys over 8 warps: the tuner's choice on the H200
  // at D = 192 and 224 (and 256 causal). 4-warp CTAs need over half the
  // shared memory there, so an SM held one CTA of 4 warps waiting on its
  // copies (D = 199: 52 TFLOP/s of its GEMMs against 180 at D = 192).
  if (widest <= 256) return {128, 64, 128, 8, 0};
  return {64, 32, 128, 4, 0};
}

// Atomic backward: the key/value kernel plus a dQ GEMM whose accumulators
// live at the same time as dK and dV, so it traverses narrower query blocks.
TuningParams backward_atomic_tuning(const KernelSpec& spec) {
  const int widest = widest_dim(spec);
  if (widest <= 64) return {64, 64, 0, 4, 0};
  if (widest <= 128) return {64, 32, 0, 4, 0};
  return {64, 32, 128, 4, 0};
}

}  // namespace

TuningParams mma_sync_shape_for(const KernelSpec& spec) {
  switch (spec.kind) {
    case KernelKind::forward: return forward_tuning(spec);
    case KernelKind::backward_query: return backward_query_tuning(spec);
    case KernelKind::backward_key_value: return backward_key_value_tuning(spec);
    case KernelKind::backward_atomic: return backward_atomic_tuning(spec);
    case KernelKind::backward_prepare:
    case KernelKind::convert_grad_q:
    case KernelKind::forward_combine:
    case KernelKind::backward_sinks:
    case KernelKind::mask_blocks: return {};
  }
  return {};
}

TuningParams split_keys_tuning(const KernelSpec& spec) {
  return {16, 64, round_up(spec.dim_v, 16) > 256 ? 256 : 0, 1, 0};
}

}  // namespace flashgen
