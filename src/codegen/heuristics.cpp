#include "codegen/heuristics.hpp"

#include <algorithm>

#include "codegen/generate.hpp"
#include "codegen/mma_sync_shapes.hpp"
#include "codegen/wgmma_shapes.hpp"

namespace flashgen {

// The next narrower traversed block, a multiple of 16: half, or 16 less when
// half is not a multiple of 16 (128, 64, 32, 16; 48, 32, 16).
static int narrower(int cols) { return (cols / 2) % 16 == 0 ? cols / 2 : cols - 16; }

bool prefer_atomic_backward(int /*dim_qk*/, int /*dim_v*/) { return false; }

// fp32 (the CUDA-core kernels, kernels/f32/simt.cuh): 4 warps of 8 rows, one
// traversed row per lane; output columns past 128 (dK and dV: 64 each) in
// chunks, so the accumulators stay in registers; fewer warps where the
// tiles (fp32, at full width) do not fit the shared memory.
static TuningParams f32_tuning(const KernelSpec& spec, std::size_t shared_limit) {
  const int most_columns = spec.kind == KernelKind::backward_key_value ? 64 : 128;
  const int head = split_dim(spec) > most_columns ? most_columns : 0;
  TuningParams t{32, 32, head, 4, 0};
  while (t.warps > 1 && shared_bytes(spec, t) > shared_limit) {
    t.warps /= 2;
    t.block_rows /= 2;
  }
  return t;
}

// default_tuning, `tma` saying whether TMA may read the traversed tensors.
static TuningParams default_tuning_of(const KernelSpec& spec, std::size_t shared_limit, bool tma);

// The wgmma key/value kernel copied by every thread keeps the copies'
// addresses live beside dK and dV: under the soft cap or ALiBi its 96- and
// 128-query blocks spilled 8-12 bytes (D = 40 and 64, compiled by the
// spread test), so it takes 64-query blocks there.
static TuningParams with_room_without_producer(const KernelSpec& spec, TuningParams t) {
  if (spec.kind == KernelKind::backward_key_value && t.wgmma && !t.producer &&
      (spec.softcap || spec.alibi) && t.block_cols > 64)
    t.block_cols = 64;
  return t;
}

TuningParams tuning_without_tma(const KernelSpec& spec, const TuningParams& t,
                                std::size_t shared_limit) {
  // Packed sequences' kernels (KernelSpec::varlen) take this path for every
  // tuning, and keep their sequence's offsets live besides.
  if (!t.tma) return spec.varlen ? with_room_without_producer(spec, t) : t;
  // 16-byte rows under a kernel whose warpgroups own their rows: the same
  // shape, copied by every thread.
  if (spec.vec == 8 && t.split == WarpgroupSplit::rows)
    return with_room_without_producer(spec, without_producer(t));
  // Elsewhere the default without TMA: the warpgroup splits copy by TMA
  // only (on 16-byte rows, the default of 8-byte ones, valid there too), and
  // token rows are shaped for their wider tiles (those TMA cannot read:
  // heads not adjacent, a token's row not a multiple of 16 bytes; the
  // key/value kernel's, query heads grouped).
  KernelSpec untiled = spec;
  if (untiled.vec == 8) untiled.vec = 4;
  return with_room_without_producer(spec, default_tuning_of(untiled, shared_limit, false));
}

// The window's second diagonal, the soft cap and ALiBi keep more values live
// per score. Where the plain shape has no register left (compiling every
// kind, tests/codegen/compile_spread_test.cpp, found 4 to 48 bytes of
// spills), the next narrower traversed block: the forward of three
// warpgroups over 128-key blocks (D <= 64), the wgmma query kernel of three
// warpgroups and the mma.sync one of two row tiles per warp.
// A user mask keeps its words of verdicts and the expression's values
// live besides (softmax/mask.cuh, UserMaskBits): there the next narrower
// block also for the mma.sync forward of two row tiles, the key/value
// kernels, and the forward of three warpgroups at any width (two
// warpgroups where each holds 256 value columns). The key/value kernel on
// token rows of more than 256 widened columns (dK and dV) narrows for any
// of them.
static TuningParams with_room_for_score_modifiers(const KernelSpec& spec, TuningParams t) {
  const bool mask = !spec.mask_mod.empty();
  if (!spec.window && !spec.softcap && !spec.alibi && !mask) return t;
  const bool forward = spec.kind == KernelKind::forward;
  if (mask && forward && t.wgmma && t.warps == 12 && t.head_block > 128) {
    // 256 value columns per warpgroup leave no register even at 16 keys:
    // two warpgroups, which get more registers each.
    t.warps = 8;
    t.block_rows = 128;
  } else if (forward && t.wgmma && t.warps == 12 && (t.block_cols == 128 || mask)) {
    t.block_cols = t.block_cols == 128 ? 64 : narrower(t.block_cols);
  } else if (mask && forward && !t.wgmma && t.row_tiles() == 2) {
    t.block_cols = narrower(t.block_cols);
  }
  if (spec.kind == KernelKind::backward_query && (t.wgmma ? t.warps == 12 : t.row_tiles() == 2))
    t.block_cols = narrower(t.block_cols);
  // The key/value kernel on token rows past 128 widened columns, which
  // spills even without them (128 bytes at D = 127; still the faster).
  const bool wide_token_rows = spec.vec < 8 && t.tma && t.split == WarpgroupSplit::rows &&
                               token_row_tiles_together(spec) > 256;
  if (spec.kind == KernelKind::backward_key_value && (mask || wide_token_rows))
    t.block_cols = narrower(t.block_cols);
  return t;
}

// The tables' rows are timed without a user mask, whose verdicts and
// expression values a kernel keeps live besides its own (softmax/mask.cuh);
// under one, a row makes room (docs/decisions.md; the defaults narrow for
// a mask themselves, with_room_for_score_modifiers above):
// - the forward of three computing warpgroups runs two over 128 keys, which
//   get more registers each (documents, 8k, D = 128: 192 x 80 spilled 8
//   bytes; causal 0.907 -> 0.819 ms, non-causal 1.440 -> 1.262; D = 64
//   1.381 -> 1.249);
// - the key/value kernel whose warpgroups own their keys (split=rows): its
//   key block one step of 16 narrower, not below 48 (documents, causal, D =
//   128: 128 x 64 spilled 156 bytes and took 1.67 ms, 128 x 48 none and
//   1.40, 128 x 32 1.53; D = 64 even, 128 x 96 spilled 16 bytes). Not the
//   wide heads' split=outputs rows, which do not spill: D = 256's 64 x 64
//   took 1.70 ms, 64 x 48 1.89.
TuningParams row_with_room_for_mask(const KernelSpec& spec, const TuningParams& row,
                                    std::size_t shared_limit) {
  if (spec.mask_mod.empty()) return row;
  TuningParams room = row;
  if (spec.kind == KernelKind::forward && row.wgmma && row.warps == 12) {
    room.block_rows = 128;
    room.block_cols = 128;
    room.warps = 8;
    room.stages = 0;  // the kernel's default, as measured
  }
  constexpr int kNarrowestKeys = 48;
  if (spec.kind == KernelKind::backward_key_value && row.split == WarpgroupSplit::rows &&
      row.block_cols > kNarrowestKeys)
    room.block_cols -= 16;
  return tuning_fits(spec, room, shared_limit) ? room : row;
}

TuningParams default_tuning(const KernelSpec& spec, std::size_t shared_limit) {
  return default_tuning_of(spec, shared_limit, true);
}

static TuningParams default_tuning_of(const KernelSpec& spec, std::size_t shared_limit, bool tma) {
  if (spec.dtype == DType::f32) return f32_tuning(spec, shared_limit);
  TuningParams t = with_room_for_score_modifiers(spec, shape_for(spec, tma));
  // The kernels with split=dims: the query kernel narrower key blocks, then
  // K two stages deep (at D = 384, 16 keys three deep beat 32 two deep by
  // 9%); the key/value kernel the other way round (the tuner's choice at
  // D = 448: 32 queries two deep); else the mma.sync kernel.
  if (t.split == WarpgroupSplit::dims) {
    if (spec.kind == KernelKind::backward_key_value && shared_bytes(spec, t) > shared_limit)
      t.stages = 2;
    while (shared_bytes(spec, t) > shared_limit && t.block_cols > 16)
      t.block_cols = narrower(t.block_cols);
    if (shared_bytes(spec, t) > shared_limit) t.stages = 2;
    if (shared_bytes(spec, t) <= shared_limit) return t;
    t = mma_sync_shape_for(spec);
  }
  // Two resident CTAs of 4 warps hide latency much better than one: narrow the
  // traversed block (not below 32) until two fit in half the limit.
  while (t.warps <= 4 && shared_bytes(spec, t) > shared_limit / 2 && t.block_cols > 32)
    t.block_cols = narrower(t.block_cols);
  // Too large for the device: two warpgroups instead of three, then narrower
  // traversed blocks, then fewer rows.
  while (shared_bytes(spec, t) > shared_limit) {
    if (t.wgmma && t.warps == 12) {
      // Two warpgroups measured better than three on narrower blocks.
      t.warps = 8;
      t.block_rows = 128;
      continue;
    }
    if (t.wgmma && t.block_cols <= 16 && t.warps <= 4) {
      t = mma_sync_shape_for(spec);  // not even one warpgroup fits: the mma.sync kernel
      continue;
    }
    if (t.block_cols > 16) {
      t.block_cols = narrower(t.block_cols);
    } else if (t.warps > (t.wgmma ? 4 : 1)) {
      t.warps /= 2;
      t.block_rows /= 2;
      // One computing warpgroup cannot keep a producer beside it (check_tuning).
      if (t.producer && t.warps < 8) t = without_producer(t);
    } else {
      break;
    }
  }
  return t;
}

}  // namespace flashgen
