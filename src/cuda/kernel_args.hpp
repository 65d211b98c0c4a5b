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

// The mask's two diagonals as the kernels take them (softmax/mask.cuh):
// query i sees keys j <= i + past_offset where `past` (causal, or a window's
// right edge) and j >= i + before_offset where `before` (a window's left
// edge). A window side that masks no key of the problem is dropped, so a
// window wider than the sequences costs nothing.
struct MaskDiagonals {
  bool past = false, before = false;
  int past_offset = 0, before_offset = 0;
};
MaskDiagonals mask_diagonals(const Problem& p);

// Problem-wide scalars (sizes, scale, the mask's diagonals); tensors left null.
flashgen_device::AttentionParams problem_params(const Problem& p);

// Packed sequences (Problem::sequences): their offsets and diagonals, and the
// batch strides of the tensors already placed in `a` set to 0 (each
// sequence's rows are found from its offsets instead). Nothing otherwise.
void place_sequences(const Problem& p, flashgen_device::AttentionParams& a);

// The widest copy (in elements: 8, 4, 2 or 1) every tensor allows: base
// pointers and all non-dim strides aligned to it; 0 when a dim stride is not 1.
int alignment_class(std::initializer_list<const TensorView*> tensors);

}  // namespace flashgen::cuda
