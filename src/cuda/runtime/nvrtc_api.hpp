// The slice of NVRTC flashgen uses, resolved from libnvrtc with dlsym on first
// use (types and values from nvrtc.h), so the library needs no toolkit to build.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cuda/runtime/nvrtc_search.hpp"

namespace flashgen::cuda::nvrtc {

using nvrtcResult = int;
using nvrtcProgram = void*;

inline constexpr nvrtcResult NVRTC_SUCCESS = 0;
inline constexpr nvrtcResult NVRTC_ERROR_COMPILATION = 6;

struct Api {
  nvrtcResult (*nvrtcVersion)(int* major, int* minor);
  const char* (*nvrtcGetErrorString)(nvrtcResult result);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram* program, const char* source, const char* name,
                                    int header_count, const char* const* headers,
                                    const char* const* header_names);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram* program);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram program, int option_count,
                                     const char* const* options);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram program, std::size_t* bytes);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram program, char* log);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram program, std::size_t* bytes);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram program, char* cubin);
};

struct Status {
  bool ok = false;
  std::string reason;   // why not, when !ok
  std::string library;  // the file that loaded
  std::string origin;   // which place of the search order it came from (nvrtc_search.hpp)
  int major = 0, minor = 0;
};
Status status();  // of the process's NVRTC, searched for once

// Opens the first candidate that loads and resolves the API from it, apart
// from the process's own NVRTC (tests give it a search order of their own).
Status load_status(const std::vector<LibraryCandidate>& candidates);

// The resolved API; throws flashgen::Error(unsupported) when libnvrtc is missing.
const Api& api();

// Throws flashgen::Error(runtime) "<call> failed: NVRTC_ERROR_X" unless success.
void check(nvrtcResult result, const char* call);

}  // namespace flashgen::cuda::nvrtc
