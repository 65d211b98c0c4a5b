// How a call's kernels schedule their work beyond the table's tile shapes:
// the wgmma forward's persistent walk (schedule=persistent: a CTA per SM
// walking the tiles, kernels/forward/wgmma_producer.cuh) and its
// warpgroups' GEMMs in turns (pingpong=1, which the backward kernels with a
// producer also run when forced), where each can run and where a call
// takes it; and the query kernel's blocks under a narrow window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "common/problem.hpp"

namespace flashgen {

// Why `tuning` cannot walk its tiles on `spec` (generate()'s rule for
// schedule=persistent), or "" where it can: the wgmma forward copying by TMA
// on 16-byte rows, all value columns in one CTA.
std::string walk_refused(const KernelSpec& spec, const TuningParams& tuning);

// `tuning` walking its tiles where the walk can run (walk_refused says
// nothing, and the shared memory holds the second Q tile), else `tuning`
// itself.
TuningParams with_persistent_tiles(const KernelSpec& spec, const TuningParams& tuning,
                                   std::size_t shared_limit);

// Query blocks that traverse at most this many keys walk (measured,
// docs/decisions.md): short sequences and narrow windows, where a tile's
// own Q load, first copies and epilogue weigh most and the walk overlaps
// them with the neighbouring tiles' GEMMs. Longer traversals lost, causal
// ones most: a walking CTA's tiles are fixed at launch (in alternating
// passes, walk_step_tile), where the grid's CTAs take the next tile as an
// SM frees up.
constexpr std::int64_t kWalkMostKeys = 384;

// A bound on the keys one query block of `rows` rows traverses: the longer
// sequence, or under a window with both edges bounded (causal bounds the
// right one) its width plus the block's rows. Computed from what
// cuda::resolve keys its memo by (the longer sequence, the window's edges).
std::int64_t keys_per_query_block(const Problem& p, std::int64_t rows);

// `tuning` walking where it can run and kWalkMostKeys bounds the keys its
// query blocks traverse, else `tuning` itself.
TuningParams walking_where_faster(const KernelSpec& spec, const Problem& p,
                                  const TuningParams& tuning, std::size_t shared_limit);

// Why `tuning`'s warpgroups cannot take turns at the tensor cores
// (generate()'s rule for pingpong=1), or "" where they can: the wgmma
// forward with a producer and two or more computing warpgroups that each
// own their rows. The backward kernels issue freely: in turns they gained
// or lost by shape and never moved the backward's total (docs/experiments.md).
std::string turns_refused(const KernelSpec& spec, const TuningParams& tuning);

// A forward `tuning` with its warpgroups taking turns wherever they can,
// else `tuning` itself: forced forward tunings gained up to 21% and the
// tables' rows, re-tuned with them, up to 8% (docs/decisions.md).
TuningParams with_gemm_turns(const KernelSpec& spec, const TuningParams& tuning);

// The tuning of a kernel over query blocks (the forward, the query
// backward) where a window, not the sequence, bounds the keys its blocks
// traverse to kWalkMostKeys: 64-row mma.sync blocks, whose narrower rows
// traverse fewer keys per row (the window plus the block's rows) and whose
// small CTAs hide each other's loads and stores; the query kernel's over
// 32 keys (Dqk and Dv up to 128), the forward's over 64 with Q in registers
// (up to 64). Else `tuning` itself. Measured on gpt-oss's window of 128 at
// D = 64 (docs/decisions.md).
TuningParams query_blocks_for_window(const KernelSpec& spec, const Problem& p,
                                     const TuningParams& tuning, std::size_t shared_limit);

// What a call runs for a table row or default `tuning` (cuda::tuning_for,
// the tuner, which times a row as it will run): walking_where_faster, then
// with_gemm_turns; query_blocks_for_window.
TuningParams scheduled_as_run(const KernelSpec& spec, const Problem& p,
                              const TuningParams& tuning, std::size_t shared_limit);

}  // namespace flashgen
