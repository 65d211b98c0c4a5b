// What the CUDA kernels do not run yet: mask expressions, and ALiBi with a
// soft cap, run on the CPU backend (and the fp64 reference) only; until the
// kernels have them, a call with one on CUDA tensors fails with this message
// instead of computing something else.
#include <string>

#include "cuda/cuda_backend.hpp"

namespace flashgen::cuda {

std::string unsupported_option(const Problem& p) {
  const char* option = nullptr;
  // The soft cap's gradient recovers tanh from P, which ALiBi's bias would
  // have to be taken out of first.
  if (p.alibi_slopes.given() && p.softcap > 0.0)
    option = "alibi_slopes together with softcap";
  else if (p.has_mask())
    option = "mask_mod";
  if (option == nullptr) return "";
  return std::string(option) +
         ": not supported by the CUDA backend yet; use the CPU backend (backend=cpu, tensors in "
         "host memory)";
}

}  // namespace flashgen::cuda
