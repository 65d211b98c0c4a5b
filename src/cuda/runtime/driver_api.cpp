#include "cuda/runtime/driver_api.hpp"

#include <mutex>
#include <string>

#include "cuda/runtime/dynamic_library.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda::driver {
namespace {

using Loaded = LoadedApi<Api, Status>;

Loaded load() {
  Loaded loaded;
  std::string attempts;
  DynamicLibrary library = DynamicLibrary::open_first({"libcuda.so.1", "libcuda.so"}, &attempts);
  if (!library.loaded()) {
    loaded.status.reason =
        "libcuda.so.1 not found: no NVIDIA driver on this machine (" + attempts + ")";
    return loaded;
  }
  Api& a = loaded.api;
  std::string missing;
  // The versioned names are the ones cuda.h maps the plain names to; the
  // unversioned symbols keep their old ABI for old binaries.
  resolve(library, "cuInit", a.cuInit, &missing);
  resolve(library, "cuDriverGetVersion", a.cuDriverGetVersion, &missing);
  resolve(library, "cuGetErrorString", a.cuGetErrorString, &missing);
  resolve(library, "cuGetErrorName", a.cuGetErrorName, &missing);
  resolve(library, "cuDeviceGet", a.cuDeviceGet, &missing);
  resolve(library, "cuDeviceGetCount", a.cuDeviceGetCount, &missing);
  resolve(library, "cuDeviceGetName", a.cuDeviceGetName, &missing);
  resolve(library, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, &missing);
  resolve(library, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain, &missing);
  resolve(library, "cuCtxSetCurrent", a.cuCtxSetCurrent, &missing);
  resolve(library, "cuCtxGetCurrent", a.cuCtxGetCurrent, &missing);
  resolve(library, "cuCtxGetDevice", a.cuCtxGetDevice, &missing);
  resolve(library, "cuCtxSynchronize", a.cuCtxSynchronize, &missing);
  resolve(library, "cuMemAlloc_v2", a.cuMemAlloc, &missing);
  resolve(library, "cuMemFree_v2", a.cuMemFree, &missing);
  resolve(library, "cuMemcpyHtoD_v2", a.cuMemcpyHtoD, &missing);
  resolve(library, "cuMemcpyDtoH_v2", a.cuMemcpyDtoH, &missing);
  resolve(library, "cuMemsetD8_v2", a.cuMemsetD8, &missing);
  resolve(library, "cuMemsetD8Async", a.cuMemsetD8Async, &missing);
  resolve(library, "cuMemcpyDtoHAsync_v2", a.cuMemcpyDtoHAsync, &missing);
  resolve(library, "cuStreamSynchronize", a.cuStreamSynchronize, &missing);
  resolve(library, "cuMemAllocAsync", a.cuMemAllocAsync, &missing);
  resolve(library, "cuMemFreeAsync", a.cuMemFreeAsync, &missing);
  resolve(library, "cuPointerGetAttribute", a.cuPointerGetAttribute, &missing);
  resolve(library, "cuModuleLoadData", a.cuModuleLoadData, &missing);
  resolve(library, "cuModuleGetFunction", a.cuModuleGetFunction, &missing);
  resolve(library, "cuFuncSetAttribute", a.cuFuncSetAttribute, &missing);
  resolve(library, "cuFuncGetAttribute", a.cuFuncGetAttribute, &missing);
  resolve(library, "cuLaunchKernel", a.cuLaunchKernel, &missing);
  resolve(library, "cuEventCreate", a.cuEventCreate, &missing);
  resolve(library, "cuEventRecord", a.cuEventRecord, &missing);
  resolve(library, "cuEventSynchronize", a.cuEventSynchronize, &missing);
  resolve(library, "cuEventDestroy_v2", a.cuEventDestroy, &missing);
  // cuEventElapsedTime_v2 appeared in 12.8 drivers; the original has the same
  // signature and is what older drivers offer.
  a.cuEventElapsedTime = library.find_as<decltype(a.cuEventElapsedTime)>("cuEventElapsedTime_v2");
  if (!a.cuEventElapsedTime) resolve(library, "cuEventElapsedTime", a.cuEventElapsedTime, &missing);
  a.cuTensorMapEncodeTiled =
      library.find_as<decltype(a.cuTensorMapEncodeTiled)>("cuTensorMapEncodeTiled");
  if (!missing.empty()) {
    loaded.status.reason = library.name() + " lacks " + missing +
                           ": the NVIDIA driver is too old (CUDA 11.2 or newer is needed)";
    return loaded;
  }
  CUresult init = a.cuInit(0);
  if (init == CUDA_ERROR_NO_DEVICE) {
    loaded.status.reason = "the NVIDIA driver reports no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)";
    return loaded;
  }
  if (init == CUDA_ERROR_STUB_LIBRARY) {
    loaded.status.reason = library.name() +
                           " is the toolkit's stub library, not a driver (cuInit: "
                           "CUDA_ERROR_STUB_LIBRARY): no NVIDIA driver on this machine";
    return loaded;
  }
  if (init != CUDA_SUCCESS) {
    const char* name = nullptr;
    a.cuGetErrorName(init, &name);
    loaded.status.reason = std::string("cuInit failed: ") + (name ? name : "unknown error") +
                           " (" + std::to_string(init) + ")";
    return loaded;
  }
  int count = 0;
  if (a.cuDeviceGetCount(&count) != CUDA_SUCCESS || count <= 0) {
    loaded.status.reason = "the NVIDIA driver reports no CUDA device";
    return loaded;
  }
  loaded.status.ok = true;
  return loaded;
}

const Loaded& loaded() { return load_once<Loaded, load>(); }

}  // namespace

Status status() { return loaded().status; }

const Api& api() { return api_or_throw(loaded()); }

std::string error_text(CUresult result) {
  const Loaded& l = loaded();
  const char* name = nullptr;
  const char* text = nullptr;
  if (l.api.cuGetErrorName) l.api.cuGetErrorName(result, &name);
  if (l.api.cuGetErrorString) l.api.cuGetErrorString(result, &text);
  std::string out = name ? name : "CUresult " + std::to_string(result);
  if (text) out += std::string(" (") + text + ")";
  return out;
}

void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  throw Error(ErrorCode::runtime, std::string(call) + " failed: " + error_text(result));
}

}  // namespace flashgen::cuda::driver
