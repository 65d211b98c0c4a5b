// What the CUDA kernels do not run yet: ALiBi and mask expressions run on
// the CPU backend (and the fp64 reference) only; until the kernels have
// them, a call with one on CUDA tensors fails with this message instead of
// computing something else.
#include <string>

#include "cuda/cuda_backend.hpp"

namespace flashgen::cuda {

std::string unsupported_option(const Problem& p) {
  const char* option = nullptr;
  if (p.alibi_slopes.given())
    option = "alibi_slopes";
  else if (p.has_mask())
    option = "mask_mod";
  if (option == nullptr) return "";
  return std::string(option) +
         ": not supported by the CUDA backend yet; use the CPU backend (backend=cpu, tensors in "
         "host memory)";
}

}  // namespace flashgen::cuda
