// The mma.sync kernels' block shapes (every arch; sm_80 runs only these),
// and the split-key forward's: what default_tuning() starts from where no
// wgmma kernel fits the spec (heuristics.cpp).
#pragma once

#include "codegen/kernel_spec.hpp"

namespace flashgen {

inline int round_up(int a, int b) { return (a + b - 1) / b * b; }

// The wider of Dqk and Dv, each rounded up to the 16 columns of an MMA tile:
// the width the block shapes' register and shared-memory budgets follow.
inline int widest_dim(const KernelSpec& spec) {
  const int dqk = round_up(spec.dim_qk, 16), dv = round_up(spec.dim_v, 16);
  return dqk > dv ? dqk : dv;
}

// The mma.sync kernel's shape for the spec's kind ({} for the row kernels).
TuningParams mma_sync_shape_for(const KernelSpec& spec);

// The split-key forward (decode): one warp of 16 query rows (a decode step's
// query heads of one key/value head) per CTA, 64-key blocks; many small CTAs
// keep enough copies in flight per SM to stream K and V at the memory's
// speed. O stays in registers to 256 value columns, past that in CTAs of 256.
TuningParams split_keys_tuning(const KernelSpec& spec);

}  // namespace flashgen
