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
// (when the caller allows non-determinism). Measured on the H200
// (docs/decisions.md): only past 256 columns on rows that are not 16-byte
// aligned (D = 257 / 385: 69 / 26 against 67 / 21 TFLOP/s), where the
// key/value kernel splits dK and dV into column chunks that each recompute
// Sᵀ and dPᵀ; on 16-byte rows its CTAs split the head dims instead and the
// two-kernel backward wins (D = 384 / 512: 135 / 95 against 85 / 65; at
// 288-352 it won even with the chunks: 138 / 124 / 109 against 120 / 122 /
// 102). Decided from the dims alone, so the workspace size is known before
// the tensors are.
bool prefer_atomic_backward(int dim_qk, int dim_v);

}  // namespace flashgen
