// Where a repeated call's host time goes: the library's forward and backward
// on a problem whose kernels take microseconds, beside the driver calls such
// a call makes (a tensor map's encoding, a launch, stream-ordered memory).
// Median wall microseconds per call of the caller's thread, the GPU drained
// before each batch of calls.
//
//   g++ -O2 -std=c++20 bench/micro/host_phases.cpp -Iinclude -I$CUDA/include \
//       build/libflashgen.a -ldl -lpthread -L$CUDA/lib64/stubs -lcuda -o host_phases
// (the static library: the shared one exports only the C API)
//   ./host_phases [B S H D]      (default 1 128 8 64)
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "flashgen/flashgen.hpp"

namespace {

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* text = nullptr;
  cuGetErrorString(r, &text);
  std::fprintf(stderr, "%s: %s\n", what, text ? text : "?");
  std::exit(1);
}

// Median over 15 batches of `calls` calls, µs per call.
double median_us(const std::function<void()>& body, int calls = 200) {
  for (int i = 0; i < 20; ++i) body();
  std::vector<double> us;
  for (int round = 0; round < 15; ++round) {
    check(cuCtxSynchronize(), "synchronize");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) body();
    const auto end = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(end - start).count() / calls);
  }
  check(cuCtxSynchronize(), "synchronize");
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

const char* kEmptyKernel = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry empty(.param .u64 a) { ret; }
.visible .entry empty_wide(.param .align 64 .b8 a[1920]) { ret; }
)";

// As many parameter bytes as a forward's launch passes (AttentionParams and
// the tensor maps), to tell the driver's cost of copying them from the
// launch's own.
constexpr int kWideParamBytes = 1920;

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t b = argc > 4 ? std::atoll(argv[1]) : 1, s = argc > 4 ? std::atoll(argv[2]) : 128,
                     h = argc > 4 ? std::atoll(argv[3]) : 8, d = argc > 4 ? std::atoll(argv[4]) : 64;
  check(cuInit(0), "cuInit");
  CUdevice device;
  check(cuDeviceGet(&device, 0), "device");
  CUcontext context;
  check(cuDevicePrimaryCtxRetain(&context, device), "context");
  check(cuCtxSetCurrent(context), "set context");

  const std::size_t elems = static_cast<std::size_t>(b * s * h * d);
  std::vector<CUdeviceptr> buffers(9);
  for (CUdeviceptr& p : buffers) {
    check(cuMemAlloc(&p, elems * 2 + 4096), "alloc");
    check(cuMemsetD16(p, 0x3c00, elems), "fill");  // 1.0 (f16 bits; bf16 0x3c00 is about 0.008)
  }
  CUdeviceptr lse;
  check(cuMemAlloc(&lse, sizeof(float) * b * h * s), "alloc lse");
  using flashgen::TensorView;
  const auto view = [&](int i) {
    return TensorView::bshd(reinterpret_cast<void*>(buffers[i]), flashgen::DType::bf16, b, s, h, d,
                            flashgen::MemoryKind::cuda, 0);
  };
  flashgen::ForwardArgs fwd;
  fwd.q = view(0);
  fwd.k = view(1);
  fwd.v = view(2);
  fwd.o = view(3);
  fwd.lse = flashgen::RowStatsView::contiguous(reinterpret_cast<float*>(lse), b, h, s,
                                               flashgen::MemoryKind::cuda, 0);
  flashgen::BackwardArgs bwd;
  bwd.q = fwd.q;
  bwd.k = fwd.k;
  bwd.v = fwd.v;
  bwd.o = fwd.o;
  bwd.lse = fwd.lse;
  bwd.grad_o = view(4);
  bwd.grad_q = view(5);
  bwd.grad_k = view(6);
  bwd.grad_v = view(7);
  flashgen::Options options;
  flashgen::forward(fwd, options);  // compiles or loads the kernels
  flashgen::backward(bwd, options);
  flashgen::BackwardArgs bwd_workspace = bwd;
  bwd_workspace.workspace_bytes = flashgen::backward_workspace_bytes(bwd, options);
  CUdeviceptr workspace;
  check(cuMemAlloc(&workspace, bwd_workspace.workspace_bytes), "alloc workspace");
  bwd_workspace.workspace = reinterpret_cast<void*>(workspace);

  std::printf("B=%lld S=%lld H=%lld D=%lld bf16, µs per call (host, median)\n",
              static_cast<long long>(b), static_cast<long long>(s), static_cast<long long>(h),
              static_cast<long long>(d));
  std::printf("  flashgen::forward                 %7.2f\n",
              median_us([&] { flashgen::forward(fwd, options); }));
  std::printf("  flashgen::backward                %7.2f\n",
              median_us([&] { flashgen::backward(bwd, options); }));
  std::printf("  flashgen::backward, workspace     %7.2f\n",
              median_us([&] { flashgen::backward(bwd_workspace, options); }));

  // A token's row of the keys, boxes of 16 columns by 128 rows, swizzled 32 bytes.
  CUtensorMap map;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(s),
                              static_cast<cuuint64_t>(h), static_cast<cuuint64_t>(b)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(h * d * 2), static_cast<cuuint64_t>(d * 2),
                                 static_cast<cuuint64_t>(s * h * d * 2)};
  const cuuint32_t box[4] = {16, 128, 1, 1}, steps[4] = {1, 1, 1, 1};
  std::printf("  cuTensorMapEncodeTiled            %7.2f\n", median_us([&] {
                check(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
                                             reinterpret_cast<void*>(buffers[1]), dims, strides, box,
                                             steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                             CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                      "encode");
              }));

  CUmodule module;
  check(cuModuleLoadData(&module, kEmptyKernel), "load empty kernel");
  CUfunction empty;
  check(cuModuleGetFunction(&empty, module, "empty"), "empty kernel");
  CUdeviceptr arg = buffers[0];
  void* args[] = {&arg};
  std::printf("  cuLaunchKernel (empty, 1 CTA)     %7.2f\n", median_us([&] {
                check(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr),
                      "launch");
              }));
  CUfunction empty_wide;
  check(cuModuleGetFunction(&empty_wide, module, "empty_wide"), "empty kernel, wide parameters");
  alignas(64) static unsigned char wide[kWideParamBytes] = {};
  void* wide_args[] = {wide};
  std::printf("  cuLaunchKernel (empty, %d B)    %7.2f\n", kWideParamBytes, median_us([&] {
                check(cuLaunchKernel(empty_wide, 1, 1, 1, 32, 1, 1, 0, nullptr, wide_args, nullptr),
                      "launch");
              }));
  std::printf("  cuMemAllocAsync + cuMemFreeAsync  %7.2f\n", median_us([&] {
                CUdeviceptr p;
                check(cuMemAllocAsync(&p, 4096, nullptr), "alloc async");
                check(cuMemFreeAsync(p, nullptr), "free async");
              }));
  int count = 0;
  std::printf("  cuDeviceGetCount                  %7.2f\n",
              median_us([&] { check(cuDeviceGetCount(&count), "count"); }));
  CUcontext current;
  std::printf("  cuCtxGetCurrent                   %7.2f\n",
              median_us([&] { check(cuCtxGetCurrent(&current), "current"); }));
  return 0;
}
