// Over-reads fault in an ordinary run: every tensor of these problems ends
// exactly where the mapped device memory ends (Placement::ends_at_unmapped_page),
// so a kernel that reads or writes a byte past a tensor's last element
// stops with an illegal-address error instead of passing by luck. The
// cases cover every load path: rows aligned to 16 bytes (TMA), 8 and 4
// bytes (cp.async), 2 bytes (staged and shifted copies), heads-major
// storage, the wide-head kernels, fp32, and the atomic backward.
#include <gtest/gtest.h>

#include <vector>

#include "attention_case.hpp"
#include "attention_check.hpp"
#include "cuda/runtime/driver_api.hpp"
#include "device_storage.hpp"

namespace flashgen::testing {
namespace {

Options gpu_options(bool deterministic) {
  Options options;
  options.backend = Backend::cuda;
  options.deterministic = deterministic;
  return options;
}

std::vector<Case> page_end_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  std::vector<Case> cases = {
      Case{1, 130, 130, 1, 1, 385, 385, false, DType::bf16, Layout::bshd},
      Case{1, 130, 130, 2, 2, 127, 127, true, DType::bf16, Layout::bshd},
      Case{1, 65, 129, 2, 2, 199, 63, false, DType::f16, Layout::bhsd},
      Case{1, 257, 257, 2, 2, 68, 68, false, DType::bf16, Layout::bshd},
      Case{1, 130, 130, 3, 3, 66, 66, true, DType::f16, Layout::bshd},
      Case{1, 300, 300, 2, 2, 64, 64, false, DType::bf16, Layout::bshd},
      Case{1, 130, 77, 4, 2, 128, 128, true, DType::bf16, Layout::bshd},
      Case{1, 65, 65, 2, 2, 256, 256, true, DType::bf16, Layout::bshd},
      Case{1, 257, 257, 2, 1, 320, 320, false, DType::bf16, Layout::bshd},
      Case{1, 65, 65, 1, 1, 512, 512, true, DType::bf16, Layout::bshd},
      Case{1, 130, 130, 2, 2, 64, 64, true, DType::f32, Layout::bshd},
      Case{1, 65, 65, 2, 1, 40, 40, false, DType::f32, Layout::bhsd}};
  for (Case& c : cases) c.placement = Placement::ends_at_unmapped_page;
  return cases;
}

class GpuPageEnd : public ::testing::TestWithParam<Case> {};

TEST_P(GpuPageEnd, ForwardReadsNothingPastTheTensors) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(check_forward(GetParam(), gpu_options(true)));
}

TEST_P(GpuPageEnd, BackwardReadsNothingPastTheTensors) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(check_backward(GetParam(), gpu_options(true)));
}

TEST_P(GpuPageEnd, AtomicBackwardReadsNothingPastTheTensors) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  if (GetParam().dtype == DType::f32) GTEST_SKIP() << "fp32 has no atomic backward";
  setenv("FLASHGEN_BACKWARD", "atomic", 1);
  const ::testing::AssertionResult result = check_backward(GetParam(), gpu_options(false));
  unsetenv("FLASHGEN_BACKWARD");
  EXPECT_TRUE(result);
}

INSTANTIATE_TEST_SUITE_P(Paths, GpuPageEnd, ::testing::ValuesIn(page_end_cases()), CaseName());

// The placement itself: the byte after the storage is not mapped, so a
// copy that reaches it fails (and the driver says so, without a fault).
TEST(GpuPageEndStorage, TheByteAfterTheStorageIsUnmapped) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  constexpr std::size_t kBytes = 1000;
  auto storage = make_storage(MemoryKind::cuda, kBytes, Placement::ends_at_unmapped_page);
  const auto end = reinterpret_cast<cuda::driver::CUdeviceptr>(storage->data()) + kBytes;
  unsigned char byte = 0;
  EXPECT_EQ(cuda::driver::api().cuMemcpyDtoH(&byte, end - 1, 1), cuda::driver::CUDA_SUCCESS);
  EXPECT_NE(cuda::driver::api().cuMemcpyDtoH(&byte, end, 1), cuda::driver::CUDA_SUCCESS);
}

}  // namespace
}  // namespace flashgen::testing
