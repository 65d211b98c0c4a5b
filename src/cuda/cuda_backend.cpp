// Placeholder until the generated kernels land: reports the GPU as unavailable.
#include "cuda/cuda_backend.hpp"

namespace flashgen::cuda {

Availability availability() { return {false, "the CUDA backend is not built yet"}; }
std::vector<std::string> forward_kernel_names(const Problem&, const ForwardArgs&) { return {}; }
std::vector<std::string> backward_kernel_names(const Problem&, const BackwardArgs&, bool) {
  return {};
}
std::size_t backward_workspace_bytes(const Problem&, bool) { return 0; }
void forward(const Problem&, const ForwardArgs&, void*) {
  throw Error(ErrorCode::unsupported, "the CUDA backend is not built yet");
}
void backward(const Problem&, const BackwardArgs&, void*, bool) {
  throw Error(ErrorCode::unsupported, "the CUDA backend is not built yet");
}

}  // namespace flashgen::cuda
