// What the CUDA kernels do not run: a mask expression reading more arrays
// than the kernels take, and a KV cache of fp32 tensors run on the CPU
// backend (and the fp64 reference) only; a call with one on CUDA tensors
// fails with this message instead of computing something else.
#include <string>

#include "cuda/cuda_backend.hpp"
#include "cuda/device/params.cuh"

namespace flashgen::cuda {

std::string unsupported_option(const Problem& p) {
  std::string option;
  if (p.has_mask() && p.mask->arrays.size() > flashgen_device::kMostMaskArrays)
    option = "mask_tensors with more than " + std::to_string(flashgen_device::kMostMaskArrays) +
             " arrays";
  // The split-key kernel, which reads a cache, has no fp32 variant.
  else if (p.kv_cache.given() && p.dtype == DType::f32)
    option = "forward_with_kvcache with float32 tensors";
  if (option.empty()) return "";
  return option +
         ": not supported by the CUDA backend yet; use the CPU backend (backend=cpu, tensors in "
         "host memory)";
}

}  // namespace flashgen::cuda
