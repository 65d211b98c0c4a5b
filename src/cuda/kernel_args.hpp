// Host-side helpers that turn validated views into what kernels take: the
// flat AttentionParams block and the alignment class of the spec.
#pragma once

#include <initializer_list>

#include "common/problem.hpp"
#include "cuda/device/params.cuh"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {

flashgen_device::TensorArg tensor_arg(const TensorView& t);
flashgen_device::RowStatsArg row_stats_arg(const RowStatsView& t);

// Problem-wide scalars (sizes, scale, causal offset); tensors left null.
flashgen_device::AttentionParams problem_params(const Problem& p);

// The widest copy (in elements: 8, 4, 2 or 1) every tensor allows: base
// pointers and all non-dim strides aligned to it; 0 when a dim stride is not 1.
int alignment_class(std::initializer_list<const TensorView*> tensors);

}  // namespace flashgen::cuda
