// Helpers shared by the runtime tests: scratch directories, tiny kernels and
// the NVRTC skip check.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "scoped_env.hpp"
#include "temp_dir.hpp"

#include "cuda/runtime/cubin_cache.hpp"
#include "cuda/runtime/nvrtc_api.hpp"
#include "cuda/runtime/runtime.hpp"

namespace flashgen::cuda::test {

using ::flashgen::testing::TempDir;

using ::flashgen::testing::ScopedEnv;


// Whether NVRTC loads here; when not, the reason for GTEST_SKIP.
inline bool nvrtc_ready(std::string* reason) {
  nvrtc::Status s = nvrtc::status();
  if (!s.ok) *reason = "NVRTC unavailable: " + s.reason;
  return s.ok;
}

// out[i] = i for i < n: one thread per element, a partial last block.
inline const char* kWriteIdsSource = R"(
extern "C" __global__ void write_ids(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}
)";

// Known resources: a 100-int local array indexed at run time lives on the
// stack (400 bytes), 64 floats of static shared memory (256 bytes).
inline const char* kStackAndSharedSource = R"(
extern "C" __global__ void stack_and_shared(int* out, int n) {
  __shared__ float tile[64];
  int local[100];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < 100; ++k) local[k] = i * k;
  tile[threadIdx.x % 64] = float(local[(i * 7) % 100]);
  __syncthreads();
  if (i < n) out[i] = int(tile[(threadIdx.x + 1) % 64]);
}
)";

inline CompileRequest request_for(const char* source, const char* entry, const std::string& arch) {
  CompileRequest r;
  r.name = std::string("test_") + entry + "_" + arch;
  r.source = source;
  r.entry = entry;
  r.arch = arch;
  return r;
}

// A cache artifact with an ELF header and a recognisable body; the disk cache
// checks no more than the ELF magic, so no compiler is needed.
inline CubinArtifact fake_artifact(const std::string& body) {
  CubinArtifact a;
  a.cubin = std::string("\x7f" "ELF", 4) + body;
  a.resources.registers = 42;
  a.resources.spill_store_bytes = 8;
  a.resources.spill_load_bytes = 12;
  a.resources.stack_frame_bytes = 16;
  a.resources.static_shared_bytes = 256;
  a.log = "ptxas info    : Used 42 registers for " + body;
  return a;
}

}  // namespace flashgen::cuda::test
