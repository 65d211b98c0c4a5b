// TMA descriptors (CUtensorMap) of the caller's tensors, encoded per call for
// the kernels whose tuning copies with TMA (copy=tma).
#pragma once

#include "cuda/device/params.cuh"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {

// The two tensors a kernel traverses (K and V for the forward, Q and dO for
// the key/value backward), each a [batch][heads][seq][dim] view of the
// tensor as it is (its own strides), read in boxes of 8 columns by
// `box_rows` rows.
// The tensors must be 16-byte aligned with 16-byte aligned strides
// (alignment class 8). Throws Error(unsupported) when the driver cannot
// encode tensor maps, Error(runtime) when it refuses one.
flashgen_device::TraversedTensorMaps traversed_tensor_maps(const TensorView& first,
                                                           const TensorView& second, int box_rows);

}  // namespace flashgen::cuda
