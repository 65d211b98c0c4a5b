// A stand-in for libcuda.so.1 whose every call succeeds at once, for timing
// and profiling the library's own host work (validation, planning, tensor
// maps, parameter blocks) on a machine with no GPU: run host_phases against
// it and what remains is flashgen's share of a call. It reports one device
// shaped like an H100 (sm_90, 132 SMs, 227 KB of shared memory a block);
// "device" memory is host memory, and launches run nothing.
//
//   gcc -O2 -shared -fPIC bench/micro/stub_driver.c -o /tmp/stub/libcuda.so.1
//   LD_LIBRARY_PATH=/tmp/stub ./host_phases
//   LD_LIBRARY_PATH=/tmp/stub perf record -g ./host_phases
//
// Precompile the kernels first (`flashgen precompile --dims 64 --seqs 128
// --kinds forward,backward` with the same FLASHGEN_CACHE_DIR, without the
// stub): NVRTC probes libcuda.so.1 itself and crashes against this one, so
// a call must find its kernels in the disk cache. Only the entry points
// flashgen and host_phases call exist.
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { kSuccess = 0 };

static int attribute_value(int attribute) {
  switch (attribute) {
    case 16: return 132;            // multiprocessors
    case 75: return 9;              // compute capability major
    case 76: return 0;              // minor
    case 81: return 233472;         // shared memory per multiprocessor
    case 82: return 65536;          // registers per multiprocessor
    case 97: return 232448;         // shared memory per block, opt-in
    default: return 1;
  }
}

static char handle_storage[64];  // what contexts, modules, functions and events point at

CUresult cuInit(unsigned flags) { (void)flags; return kSuccess; }
CUresult cuDriverGetVersion(int* version) { *version = 13000; return kSuccess; }
CUresult cuGetErrorString(CUresult error, const char** text) {
  (void)error;
  *text = "stub driver";
  return kSuccess;
}
CUresult cuGetErrorName(CUresult error, const char** text) { return cuGetErrorString(error, text); }
CUresult cuDeviceGet(int* device, int ordinal) { *device = ordinal; return kSuccess; }
CUresult cuDeviceGetCount(int* count) { *count = 1; return kSuccess; }
CUresult cuDeviceGetName(char* name, int length, int device) {
  (void)device;
  strncpy(name, "Stub H100 (no GPU)", (size_t)length);
  return kSuccess;
}
CUresult cuDeviceGetAttribute(int* value, int attribute, int device) {
  (void)device;
  *value = attribute_value(attribute);
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRetain(void** context, int device) {
  (void)device;
  *context = handle_storage;
  return kSuccess;
}
CUresult cuCtxSetCurrent(void* context) { (void)context; return kSuccess; }
CUresult cuCtxGetCurrent(void** context) { *context = handle_storage; return kSuccess; }
CUresult cuCtxGetDevice(int* device) { *device = 0; return kSuccess; }
CUresult cuCtxSynchronize(void) { return kSuccess; }

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  void* p = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == NULL) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  *ptr = (CUdeviceptr)p;
  return kSuccess;
}
CUresult cuMemFree_v2(CUdeviceptr ptr) { free((void*)ptr); return kSuccess; }
CUresult cuMemAllocAsync(CUdeviceptr* ptr, size_t bytes, void* stream) {
  (void)stream;
  return cuMemAlloc_v2(ptr, bytes);
}
CUresult cuMemFreeAsync(CUdeviceptr ptr, void* stream) { (void)stream; return cuMemFree_v2(ptr); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  memcpy((void*)dst, src, bytes);
  return kSuccess;
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  memcpy(dst, (const void*)src, bytes);
  return kSuccess;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, void* stream) {
  (void)stream;
  return cuMemcpyDtoH_v2(dst, src, bytes);
}
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
  memset((void*)dst, value, count);
  return kSuccess;
}
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, void* stream) {
  (void)stream;
  return cuMemsetD8_v2(dst, value, count);
}
CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short value, size_t count) {
  unsigned short* p = (unsigned short*)dst;
  for (size_t i = 0; i < count; ++i) p[i] = value;
  return kSuccess;
}
CUresult cuStreamSynchronize(void* stream) { (void)stream; return kSuccess; }
CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  (void)attribute, (void)ptr;
  *(int*)data = 0;  // every pointer is device 0's
  return kSuccess;
}

CUresult cuModuleLoadData(void** module, const void* image) {
  (void)image;
  *module = handle_storage;
  return kSuccess;
}
CUresult cuModuleGetFunction(void** function, void* module, const char* name) {
  (void)module, (void)name;
  *function = handle_storage;
  return kSuccess;
}
CUresult cuFuncSetAttribute(void* function, int attribute, int value) {
  (void)function, (void)attribute, (void)value;
  return kSuccess;
}
CUresult cuFuncGetAttribute(int* value, int attribute, void* function) {
  (void)function;
  *value = attribute == 4 ? 128 : 0;  // registers a thread; no spills, no static shared memory
  return kSuccess;
}
CUresult cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void* stream, void** params,
                        void** extra) {
  (void)function, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared;
  (void)stream, (void)params, (void)extra;
  return kSuccess;
}

CUresult cuEventCreate(void** event, unsigned flags) {
  (void)flags;
  *event = handle_storage;
  return kSuccess;
}
CUresult cuEventRecord(void* event, void* stream) { (void)event, (void)stream; return kSuccess; }
CUresult cuEventSynchronize(void* event) { (void)event; return kSuccess; }
CUresult cuEventElapsedTime(float* ms, void* start, void* end) {
  (void)start, (void)end;
  *ms = 0.0f;
  return kSuccess;
}
CUresult cuEventElapsedTime_v2(float* ms, void* start, void* end) {
  return cuEventElapsedTime(ms, start, end);
}
CUresult cuEventDestroy_v2(void* event) { (void)event; return kSuccess; }

CUresult cuTensorMapEncodeTiled(void* map, int type, unsigned rank, void* address,
                                const unsigned long long* dims, const unsigned long long* strides,
                                const unsigned* box, const unsigned* steps, int interleave,
                                int swizzle, int promotion, int fill) {
  (void)type, (void)rank, (void)address, (void)dims, (void)strides, (void)box, (void)steps;
  (void)interleave, (void)swizzle, (void)promotion, (void)fill;
  memset(map, 0, 128);
  return kSuccess;
}
