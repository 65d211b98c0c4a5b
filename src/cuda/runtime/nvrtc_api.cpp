#include "cuda/runtime/nvrtc_api.hpp"

#include <mutex>
#include <string>
#include <vector>

#include "cuda/runtime/dynamic_library.hpp"
#include "cuda/runtime/nvrtc_search.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda::nvrtc {
namespace {

using Loaded = LoadedApi<Api, Status>;

// Where the opened file came from, by the candidate it matched.
std::string origin_of(const DynamicLibrary& library,
                      const std::vector<LibraryCandidate>& candidates) {
  if (library.was_loaded()) return "already loaded by the process";
  for (const LibraryCandidate& candidate : candidates)
    if (candidate.path == library.name()) return candidate.origin;
  return "";
}

Loaded load_from(const std::vector<LibraryCandidate>& candidates) {
  Loaded loaded;
  std::string attempts;
  std::vector<std::string> paths;
  for (const LibraryCandidate& candidate : candidates) paths.push_back(candidate.path);
  DynamicLibrary library = DynamicLibrary::open_first(paths, &attempts);
  if (!library.loaded()) {
    loaded.status.reason =
        "libnvrtc not found: pip install flashgen[cuda] (the nvidia-cuda-nvrtc wheel), install "
        "the CUDA toolkit's NVRTC or set CUDA_HOME (" +
        attempts + ")";
    return loaded;
  }
  loaded.status.origin = origin_of(library, candidates);
  Api& a = loaded.api;
  std::string missing;
  resolve(library, "nvrtcVersion", a.nvrtcVersion, &missing);
  resolve(library, "nvrtcGetErrorString", a.nvrtcGetErrorString, &missing);
  resolve(library, "nvrtcCreateProgram", a.nvrtcCreateProgram, &missing);
  resolve(library, "nvrtcDestroyProgram", a.nvrtcDestroyProgram, &missing);
  resolve(library, "nvrtcCompileProgram", a.nvrtcCompileProgram, &missing);
  resolve(library, "nvrtcGetProgramLogSize", a.nvrtcGetProgramLogSize, &missing);
  resolve(library, "nvrtcGetProgramLog", a.nvrtcGetProgramLog, &missing);
  resolve(library, "nvrtcGetCUBINSize", a.nvrtcGetCUBINSize, &missing);
  resolve(library, "nvrtcGetCUBIN", a.nvrtcGetCUBIN, &missing);
  loaded.status.library = library.name();
  if (!missing.empty()) {
    loaded.status.reason = library.name() + " lacks " + missing +
                           ": NVRTC is too old (CUDA 11.2 or newer is needed)";
    return loaded;
  }
  if (a.nvrtcVersion(&loaded.status.major, &loaded.status.minor) != NVRTC_SUCCESS) {
    loaded.status.reason = library.name() + ": nvrtcVersion failed";
    return loaded;
  }
  loaded.status.ok = true;
  return loaded;
}

Loaded load() { return load_from(candidates(search_roots())); }

const Loaded& loaded() { return load_once<Loaded, load>(); }

}  // namespace

Status status() { return loaded().status; }

Status load_status(const std::vector<LibraryCandidate>& candidates) {
  return load_from(candidates).status;
}

const Api& api() { return api_or_throw(loaded()); }

void check(nvrtcResult result, const char* call) {
  if (result == NVRTC_SUCCESS) return;
  const char* text = api().nvrtcGetErrorString(result);
  throw Error(ErrorCode::runtime, std::string(call) + " failed: " +
                                      (text ? text : "NVRTC error " + std::to_string(result)));
}

}  // namespace flashgen::cuda::nvrtc
