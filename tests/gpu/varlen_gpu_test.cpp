// forward_varlen / backward_varlen on CUDA tensors (cu_seqlens in device
// memory, or in host memory) against the fp64 reference run per sequence: the cases the CPU
// backend runs, the deterministic and the atomic backward, and what is
// refused with a clear error.
#include <gtest/gtest.h>

#include "device_storage.hpp"
#include "fails_with.hpp"
#include "varlen_case.hpp"

namespace flashgen::testing {
namespace {

constexpr MemoryKind kGpu = MemoryKind::cuda;

Options gpu_options(const VarlenCase& c, bool deterministic = true) {
  Options options;
  options.backend = Backend::cuda;
  options.causal = c.causal;
  options.deterministic = deterministic;
  return options;
}

class GpuVarlen : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(GpuVarlen, ForwardMatchesTheReferencePerSequence) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_varlen_forward(GetParam(), kGpu, gpu_options(GetParam()));
}

TEST_P(GpuVarlen, BackwardMatchesTheReferencePerSequence) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_varlen_backward(GetParam(), kGpu, gpu_options(GetParam()));
}

TEST_P(GpuVarlen, AtomicBackwardMatchesTheReferencePerSequence) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_varlen_backward(GetParam(), kGpu, gpu_options(GetParam(), false));
}

// cu_seqlens in host memory with CUDA tensors: read as they are.
TEST_P(GpuVarlen, HostOffsetsServeCudaTensors) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_varlen_forward(GetParam(), kGpu, gpu_options(GetParam()), true);
  check_varlen_backward(GetParam(), kGpu, gpu_options(GetParam()), true);
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuVarlen, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

// dL/dsink sums the sequences' shares on the host: refused on CUDA tensors,
// naming the option, before anything runs.
TEST(GpuVarlenSinks, TheBackwardRefusesSinksOnCudaTensors) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const VarlenCase c{"sinks", {40, 7}, {40, 9}, 2, 1, 64, 64, true};
  VarlenTensors t(c, kGpu);
  std::unique_ptr<Storage> sinks = make_storage(kGpu, 2 * sizeof(float));
  std::unique_ptr<Storage> grad_sinks = make_storage(kGpu, 2 * sizeof(float));
  const float values[2] = {0.5f, -1.0f};
  sinks->upload(values, sizeof values);
  Options options = gpu_options(c);
  options.sinks = HeadVectorView::heads(static_cast<float*>(sinks->data()), 2, kGpu);
  options.grad_sinks = HeadVectorView::heads(static_cast<float*>(grad_sinks->data()), 2, kGpu);
  EXPECT_NO_THROW(forward_varlen(t.forward_args(c), options));
  EXPECT_TRUE(fails_with(ErrorCode::unsupported, "options.sinks",
                         [&] { backward_varlen(t.backward_args(c), options); }));
}

}  // namespace
}  // namespace flashgen::testing
