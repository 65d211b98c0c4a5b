// TMA descriptors (CUtensorMap) of the caller's tensors, encoded per call for
// the kernels whose tuning copies with TMA (copy=tma).
#pragma once

#include "cuda/device/params.cuh"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {

// K and V of a forward, each a [batch][heads][seq][dim] view of the tensor
// as it is (its own strides), read in boxes of 8 columns by `box_rows` rows.
// The tensors must be 16-byte aligned with 16-byte aligned strides
// (alignment class 8). Throws Error(unsupported) when the driver cannot
// encode tensor maps, Error(runtime) when it refuses one.
flashgen_device::ForwardTensorMaps forward_tensor_maps(const TensorView& k, const TensorView& v,
                                                       int box_rows);

}  // namespace flashgen::cuda
