// The slice of the CUDA driver API flashgen uses, resolved from libcuda.so.1
// with dlsym on first use. Types and enum values are copied from cuda.h (the
// ABI is stable), so the library builds and runs its CPU backend on machines
// with no driver or toolkit.
#pragma once

#include <cstddef>
#include <string>

namespace flashgen::cuda::driver {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // 64-bit hosts only
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUevent = void*;

// Values from cuda.h (CUresult, CUdevice_attribute, CUfunction_attribute,
// CUpointer_attribute, CUevent_flags).
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;

inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

inline constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
inline constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
inline constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

inline constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;

inline constexpr unsigned CU_EVENT_DEFAULT = 0;

// CUtensorMapDataType, ...Interleave, ...Swizzle, ...L2promotion, ...FloatOOBfill.
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1;
inline constexpr int CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
inline constexpr int CU_TENSOR_MAP_SWIZZLE_NONE = 0;
inline constexpr int CU_TENSOR_MAP_SWIZZLE_32B = 1;
inline constexpr int CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2;
inline constexpr int CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;  // zeros past the ends

struct Api {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);
  CUresult (*cuGetErrorName)(CUresult error, const char** text);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxGetCurrent)(CUcontext* context);
  CUresult (*cuCtxGetDevice)(CUdevice* device);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, std::size_t bytes);                        // _v2
  CUresult (*cuMemFree)(CUdeviceptr ptr);                                              // _v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, std::size_t bytes);       // _v2
  CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, std::size_t bytes);             // _v2
  CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, std::size_t count);     // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, std::size_t count,
                              CUstream stream);
  CUresult (*cuMemcpyDtoHAsync)(void* dst, CUdeviceptr src, std::size_t bytes,
                                CUstream stream);  // _v2
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuMemAllocAsync)(CUdeviceptr* ptr, std::size_t bytes, CUstream stream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr ptr, CUstream stream);
  CUresult (*cuPointerGetAttribute)(void* data, int attribute, CUdeviceptr ptr);
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image);
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
  CUresult (*cuFuncGetAttribute)(int* value, int attribute, CUfunction function);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y,
                             unsigned grid_z, unsigned block_x, unsigned block_y,
                             unsigned block_z, unsigned shared_bytes, CUstream stream,
                             void** params, void** extra);
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end);  // _v2 when present
  CUresult (*cuEventDestroy)(CUevent event);                              // _v2
  // CUDA 12 drivers and later; null before (TMA kernels are then refused).
  CUresult (*cuTensorMapEncodeTiled)(void* tensor_map, int data_type, unsigned rank,
                                     void* global_address, const unsigned long long* global_dim,
                                     const unsigned long long* global_strides,
                                     const unsigned* box_dim, const unsigned* element_strides,
                                     int interleave, int swizzle, int l2_promotion,
                                     int oob_fill);
};

// Whether the driver loaded and initialised, and why not.
struct Status {
  bool ok = false;
  std::string reason;
};
Status status();

// The resolved API; throws flashgen::Error(unsupported) with status().reason
// when the driver or a device is missing.
const Api& api();

// Throws flashgen::Error(runtime) "<call> failed: CUDA_ERROR_X (text)" unless
// `result` is CUDA_SUCCESS.
void check(CUresult result, const char* call);
std::string error_text(CUresult result);

}  // namespace flashgen::cuda::driver
