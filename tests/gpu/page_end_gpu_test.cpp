// The placement the page-end GPU cases rely on (Placement::ends_at_unmapped_page;
// the cases themselves run in attention_gpu_test.cpp): the byte after the
// storage is not mapped, so a copy that reaches it fails, and the driver
// says so without a fault.
#include <gtest/gtest.h>

#include "cuda/runtime/driver_api.hpp"
#include "device_storage.hpp"

namespace flashgen::testing {
namespace {

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
