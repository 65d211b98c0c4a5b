// Run-time compilation and launch: libcuda and libnvrtc are opened with
// dlopen on first use; kernels are compiled once per (source, arch, options)
// and cached in memory and on disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace flashgen::cuda {

// Opaque driver handles (CUfunction, CUstream, CUdeviceptr, CUevent).
using FunctionHandle = void*;
using StreamHandle = void*;
using DevicePtr = std::uint64_t;

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::size_t shared_per_block_optin = 0;  // bytes a block may use after opting in
  std::size_t shared_per_sm = 0;
  int registers_per_sm = 0;
  std::string driver_version;  // "13.0"
  // NVRTC target: "sm_90a" on Hopper (wgmma/setmaxnreg), else "sm_XY".
  std::string arch() const;
};

// Throws flashgen::Error(unsupported) with the reason when libcuda, a device
// or libnvrtc is missing.
const DeviceInfo& device_info(int ordinal);
int device_count();
std::string nvrtc_version();  // "13.0"; throws when libnvrtc is missing

// Makes the primary context of `ordinal` current on the calling thread; it is
// retained once and kept for the life of the process. Kernels, buffers and
// events are created in the current context.
void use_device(int ordinal);
// The device of the calling thread's current context; makes device 0 current
// when the thread has none.
int current_device();

// What ptxas reported for a compiled kernel.
struct KernelResources {
  int registers = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int stack_frame_bytes = 0;
  int static_shared_bytes = 0;
};

struct CompileRequest {
  std::string name;         // readable (spec + tuning); part of the cache key and logs
  std::string source;       // the generated translation unit
  std::string entry;        // extern "C" __global__ function name
  std::string arch;         // "sm_90a", "sm_80", ...
  std::vector<std::string> options;  // extra NVRTC options
};

struct CompiledKernel {
  FunctionHandle function = nullptr;  // null for compile-only results
  int ordinal = -1;                   // device whose primary context holds `function`
  KernelResources resources;
  std::string log;
};

// Compile with NVRTC to a cubin without a GPU (CI checks codegen and spills).
CompiledKernel compile_only(const CompileRequest& request);

// Compile or fetch from the in-memory / on-disk cache, load into the current
// context of `ordinal`, and raise its dynamic shared-memory limit to
// `dynamic_shared_bytes`. Thread-safe; the returned reference stays valid.
const CompiledKernel& get_kernel(const CompileRequest& request, int ordinal,
                                 std::size_t dynamic_shared_bytes);

// Compiles into the on-disk cache without a GPU (for deployment: the first
// call on the GPU then loads the cubin instead of compiling). Returns true
// when the cache already held it; `resources`, when given, receives what
// ptxas reported.
bool precompile(const CompileRequest& request, KernelResources* resources = nullptr);

struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  std::size_t dynamic_shared_bytes = 0;
};
// params: pointers to each kernel argument, as cuLaunchKernel takes them.
// Makes kernel.ordinal's context current first.
void launch(const CompiledKernel& kernel, const LaunchShape& shape, StreamHandle stream,
            void** params);

// Device ordinal owning a pointer (cuPointerGetAttribute); -1 when not device memory.
int pointer_device(const void* ptr);

// Bytes rounded up to 256: where each part of one scratch allocation starts.
constexpr std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Stream-ordered scratch (cuMemAllocAsync / cuMemFreeAsync).
DevicePtr allocate_async(std::size_t bytes, StreamHandle stream);
void free_async(DevicePtr ptr, StreamHandle stream);
// Stream-ordered byte fill; and a copy to host memory that waits for the
// stream (its work before the copy included).
void fill_bytes_async(DevicePtr ptr, unsigned char value, std::size_t bytes, StreamHandle stream);
void copy_to_host(void* host, DevicePtr source, std::size_t bytes, StreamHandle stream);

// Cache directory: $FLASHGEN_CACHE_DIR or ~/.cache/flashgen/<version>/<arch>/.
std::string cache_dir(const std::string& arch);

// ---- Helpers for tests, the CLI and benchmarks (not used by kernels). ----
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return reinterpret_cast<void*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
  void fill_bytes(unsigned char value);

 private:
  DevicePtr ptr_ = 0;
  std::size_t bytes_ = 0;
};

void synchronize();  // the current context

// Times `body` (which enqueues work on `stream`) with CUDA events: `warmup`
// untimed calls, then `repeats` timed ones; returns every time in ms.
template <class Body>
std::vector<double> time_ms(Body&& body, StreamHandle stream, int warmup, int repeats);
std::vector<double> time_ms_impl(void (*call)(void*), void* context, StreamHandle stream,
                                 int warmup, int repeats);
template <class Body>
std::vector<double> time_ms(Body&& body, StreamHandle stream, int warmup, int repeats) {
  // Body is a reference type where the caller passes an lvalue.
  typedef std::remove_reference_t<Body> Callable;
  return time_ms_impl([](void* c) { (*static_cast<Callable*>(c))(); }, &body, stream, warmup,
                      repeats);
}

}  // namespace flashgen::cuda
