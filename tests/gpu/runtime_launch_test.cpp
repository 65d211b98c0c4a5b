// The runtime on a real GPU: device facts, get_kernel + launch of tiny
// hand-written kernels, memory and timing. Every test skips, saying why,
// where no GPU (or NVRTC) is present.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <numeric>
#include <thread>
#include <vector>

#include "../runtime/runtime_test_util.hpp"
#include "cuda/runtime/compiler.hpp"
#include "cuda/runtime/cubin_cache.hpp"
#include "cuda/runtime/runtime.hpp"
#include "device_storage.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {
namespace {

constexpr int kDevice = 0;

class RuntimeGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!testing::gpu_available(&reason)) GTEST_SKIP() << "no usable GPU: " << reason;
    use_device(kDevice);
    arch_ = device_info(kDevice).arch();
  }
  // A request whose name is unique to this process, so it is compiled or read
  // from disk here rather than found in the in-process cache of another test.
  CompileRequest unique_request(const char* source, const char* entry) {
    CompileRequest r = test::request_for(source, entry, arch_);
    r.name += "_pid" + std::to_string(::getpid()) + "_" +
              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    return r;
  }
  std::string arch_;
};

TEST_F(RuntimeGpuTest, DeviceInfoIsPlausible) {
  const DeviceInfo& info = device_info(kDevice);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.cc_major, 7);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.shared_per_block_optin, 0u);
  EXPECT_GE(info.shared_per_sm, info.shared_per_block_optin);
  EXPECT_GT(info.registers_per_sm, 0);
  EXPECT_NE(info.driver_version.find('.'), std::string::npos) << info.driver_version;
  EXPECT_EQ(info.arch().rfind("sm_", 0), 0u) << info.arch();
  if (info.cc_major == 9 && info.cc_minor == 0) {
    EXPECT_EQ(info.arch(), "sm_90a");
  }
  EXPECT_EQ(&device_info(kDevice), &info) << "device_info must return one object per device";
  EXPECT_GE(device_count(), 1);
  EXPECT_THROW(device_info(device_count()), Error);
}

TEST_F(RuntimeGpuTest, LaunchWritesThreadIds) {
  constexpr int kThreads = 128;
  constexpr int kElements = 300;  // two full blocks and a partial one
  const CompiledKernel& k = get_kernel(unique_request(test::kWriteIdsSource, "write_ids"), kDevice, 0);
  ASSERT_NE(k.function, nullptr);
  EXPECT_EQ(k.ordinal, kDevice);
  EXPECT_GT(k.resources.registers, 0);
  DeviceBuffer out((kElements + kThreads) * sizeof(int));  // + guard band past n
  out.fill_bytes(0xff);
  int n = kElements;
  void* out_ptr = out.data();
  void* params[] = {&out_ptr, &n};
  LaunchShape shape;
  shape.grid[0] = (kElements + kThreads - 1) / kThreads;
  shape.block[0] = kThreads;
  launch(k, shape, nullptr, params);
  synchronize();
  std::vector<int> host(kElements + kThreads);
  out.download(host.data(), host.size() * sizeof(int));
  for (int i = 0; i < kElements; ++i) ASSERT_EQ(host[i], i) << "element " << i;
  for (std::size_t i = kElements; i < host.size(); ++i) ASSERT_EQ(host[i], -1) << "guard " << i;
}

TEST_F(RuntimeGpuTest, InProcessCacheReturnsTheSameKernelToEveryThread) {
  CompileRequest r = unique_request(test::kWriteIdsSource, "write_ids");
  constexpr int kThreads = 8;
  std::vector<const CompiledKernel*> got(kThreads, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      use_device(kDevice);
      got[t] = &get_kernel(r, kDevice, 0);
    });
  for (std::thread& t : threads) t.join();
  for (const CompiledKernel* k : got) EXPECT_EQ(k, got[0]);
  EXPECT_EQ(&get_kernel(r, kDevice, 0), got[0]);
}

TEST_F(RuntimeGpuTest, DiskCacheIsWrittenAndValid) {
  test::TempDir dir;
  ASSERT_EQ(::setenv("FLASHGEN_CACHE_DIR", dir.path().c_str(), 1), 0);
  CompileRequest r = unique_request(test::kWriteIdsSource, "write_ids");
  get_kernel(r, kDevice, 0);
  ::unsetenv("FLASHGEN_CACHE_DIR");
  CubinCache cache(dir.path());
  std::optional<CubinArtifact> stored = cache.load(make_kernel_key(r, nvrtc_version()));
  ASSERT_TRUE(stored.has_value()) << "no valid cache file in " << dir.path();
  EXPECT_GT(stored->resources.registers, 0);
}

TEST_F(RuntimeGpuTest, DynamicSharedMemoryAboveTheDefaultLimit) {
  constexpr std::size_t kDefaultLimit = 48 * 1024;  // without opting in
  constexpr std::size_t kBytes = 64 * 1024;
  const DeviceInfo& info = device_info(kDevice);
  if (info.shared_per_block_optin < kBytes) GTEST_SKIP() << "device allows less than 64 KiB";
  const char* source = R"(
extern "C" __global__ void reverse_through_shared(int* out, int words) {
  extern __shared__ int buffer[];  // [words]
  for (int i = threadIdx.x; i < words; i += blockDim.x) buffer[i] = i;
  __syncthreads();
  for (int i = threadIdx.x; i < words; i += blockDim.x) out[i] = buffer[words - 1 - i];
}
)";
  const CompiledKernel& k = get_kernel(unique_request(source, "reverse_through_shared"), kDevice, kBytes);
  static_assert(kBytes > kDefaultLimit);
  int words = int(kBytes / sizeof(int));
  DeviceBuffer out(kBytes);
  void* out_ptr = out.data();
  void* params[] = {&out_ptr, &words};
  LaunchShape shape;
  shape.block[0] = 256;
  shape.dynamic_shared_bytes = kBytes;
  launch(k, shape, nullptr, params);
  synchronize();
  std::vector<int> host(static_cast<std::size_t>(words));
  out.download(host.data(), kBytes);
  for (int i = 0; i < words; ++i) ASSERT_EQ(host[i], words - 1 - i) << i;
}

TEST_F(RuntimeGpuTest, TooMuchSharedMemoryIsUnsupported) {
  const DeviceInfo& info = device_info(kDevice);
  try {
    get_kernel(unique_request(test::kWriteIdsSource, "write_ids"), kDevice,
               info.shared_per_block_optin + 1);
    FAIL() << "a shared-memory request above the device's limit was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported) << e.what();
  }
}

TEST_F(RuntimeGpuTest, DeviceBufferRoundTrip) {
  std::vector<unsigned char> in(1000);
  std::iota(in.begin(), in.end(), 0);
  DeviceBuffer buffer(in.size());
  EXPECT_EQ(buffer.bytes(), in.size());
  buffer.upload(in.data(), in.size());
  std::vector<unsigned char> back(in.size(), 0);
  buffer.download(back.data(), back.size());
  EXPECT_EQ(back, in);
  // Offsets address inside the buffer.
  const unsigned char patch[3] = {7, 7, 7};
  buffer.upload(patch, 3, 500);
  buffer.download(back.data(), back.size());
  EXPECT_EQ(back[499], in[499]);
  EXPECT_EQ(back[500], 7);
  EXPECT_EQ(back[502], 7);
  EXPECT_EQ(back[503], in[503]);
  buffer.fill_bytes(0xab);
  buffer.download(back.data(), back.size());
  for (unsigned char b : back) ASSERT_EQ(b, 0xab);
  EXPECT_THROW(buffer.upload(in.data(), 10, 995), Error);
  EXPECT_THROW(buffer.download(back.data(), 1001), Error);
  // Moves transfer ownership.
  void* address = buffer.data();
  DeviceBuffer moved(std::move(buffer));
  EXPECT_EQ(moved.data(), address);
  EXPECT_EQ(buffer.data(), nullptr);
  EXPECT_EQ(pointer_device(moved.data()), kDevice);
}

TEST_F(RuntimeGpuTest, PointerDeviceTellsHostFromDevice) {
  int on_stack = 0;
  std::vector<int> on_heap(16);
  EXPECT_EQ(pointer_device(&on_stack), -1);
  EXPECT_EQ(pointer_device(on_heap.data()), -1);
  EXPECT_EQ(pointer_device(nullptr), -1);
}

TEST_F(RuntimeGpuTest, StreamOrderedScratch) {
  DevicePtr p = allocate_async(4096, nullptr);
  ASSERT_NE(p, 0u);
  EXPECT_EQ(pointer_device(reinterpret_cast<void*>(p)), kDevice);
  free_async(p, nullptr);
  synchronize();
  EXPECT_EQ(allocate_async(0, nullptr), 0u);
}

TEST_F(RuntimeGpuTest, TimingReturnsEveryRepeatPositive) {
  const char* source = R"(
extern "C" __global__ void spin(long long cycles, int* sink) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
  if (threadIdx.x == 0) sink[blockIdx.x] = 1;
}
)";
  const CompiledKernel& k = get_kernel(unique_request(source, "spin"), kDevice, 0);
  DeviceBuffer sink(sizeof(int));
  long long cycles = 100000;  // tens of microseconds at any clock
  void* sink_ptr = sink.data();
  void* params[] = {&cycles, &sink_ptr};
  LaunchShape shape;
  int calls = 0;
  constexpr int kWarmup = 2, kRepeats = 5;
  std::vector<double> times = time_ms(
      [&] {
        ++calls;
        launch(k, shape, nullptr, params);
      },
      nullptr, kWarmup, kRepeats);
  EXPECT_EQ(calls, kWarmup + kRepeats);
  ASSERT_EQ(times.size(), std::size_t(kRepeats));
  for (double t : times) {
    EXPECT_GT(t, 0.0);
    EXPECT_LT(t, 1000.0);
  }
  EXPECT_THROW(time_ms([] {}, nullptr, 0, 0), Error);
}

TEST_F(RuntimeGpuTest, CompileOnlyResultCannotLaunch) {
  CompiledKernel k = compile_only(unique_request(test::kWriteIdsSource, "write_ids"));
  LaunchShape shape;
  EXPECT_THROW(launch(k, shape, nullptr, nullptr), Error);
}

}  // namespace
}  // namespace flashgen::cuda
