// Default tuning when no tuning-table row applies: a documented function of
// the spec, chosen from what fits registers and shared memory on sm_80/sm_90.
#pragma once

#include <cstddef>

#include "codegen/kernel_spec.hpp"

namespace flashgen {

// shared_limit: bytes of shared memory a CTA may use on the target device;
// block cols shrink (down to 16), then rows, until the kernel fits.
TuningParams default_tuning(const KernelSpec& spec, std::size_t shared_limit);

// The tuning to run in place of `tuning` where TMA cannot read the
// traversed tensors (a zero stride): the same shape copied without the
// producer, or, for the kernels whose warpgroups split the work (they copy
// by TMA only), the default of rows TMA cannot read.
TuningParams tuning_without_tma(const KernelSpec& spec, const TuningParams& tuning,
                                std::size_t shared_limit);

// A table row of `spec`'s kind as a call under a user mask runs it: rows
// are timed without one, whose values the kernels keep live besides their
// own (a forward of two warpgroups, a narrower key/value block; the measured
// cases in heuristics.cpp). Without a mask, or where the roomier shape does
// not fit, the row itself.
TuningParams row_with_room_for_mask(const KernelSpec& spec, const TuningParams& row,
                                    std::size_t shared_limit);

// Whether the atomic-dQ backward is expected to beat the two-kernel one
// (when the caller allows non-determinism). Measured (docs/decisions.md):
// nowhere now. It lost at every D up to 256, and past 256 once both
// two-kernel backward kernels split the head dims, on 16-byte rows (D =
// 384 / 512: 135 / 95 against 85 / 65 TFLOP/s, H200) and on the token rows
// of odd dims (D = 257 / 385: 109 / 99 against 69 / 25, H100). Heads-major
// odd dims past 256, which the token-row views cannot read, are the one
// layout where it would win (26 against 21 at 385), but the choice is made
// from the dims alone, so that the workspace size is known before the
// tensors are.
bool prefer_atomic_backward(int dim_qk, int dim_v);

}  // namespace flashgen
