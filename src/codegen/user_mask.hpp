// A user mask (Options::mask_mod) as device code: the generator splices it
// into the kernels that evaluate it (KernelSpec::mask_mod).
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "common/mask_expression.hpp"

namespace flashgen {

// KernelSpec::mask_arrays of these arrays ("doc:i,weight:f"), and back.
std::string mask_arrays_text(const std::vector<mask::ArrayName>& arrays);
std::vector<mask::ArrayName> parse_mask_arrays(const std::string& text);

// struct UserMask { static __device__ bool attends(p, b, h, q_idx, kv_idx,
// fault) }: the expression with C's evaluation order, its array reads and
// integer divisions checked (softmax/user_mask.cuh), its int64 + - * wrapping.
std::string user_mask_source(const KernelSpec& spec);

}  // namespace flashgen
