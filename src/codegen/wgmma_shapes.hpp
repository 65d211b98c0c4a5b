// The default shape of the kernel family that serves a spec (the wgmma
// kernels where they fit, else mma.sync), before tuning tables and the room
// score modifiers take (heuristics.cpp).
#pragma once

#include "codegen/kernel_spec.hpp"

namespace flashgen {

// `tma`: whether TMA may read the traversed tensors (tuning_without_tma asks
// for the shape without it).
TuningParams shape_for(const KernelSpec& spec, bool tma = true);

}  // namespace flashgen
