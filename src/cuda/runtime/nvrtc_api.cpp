#include "cuda/runtime/nvrtc_api.hpp"

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/runtime/dynamic_library.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda::nvrtc {
namespace {

struct Loaded {
  Api api{};
  Status status;
};

template <class F>
void resolve(const DynamicLibrary& library, const char* symbol, F& slot, std::string* missing) {
  slot = library.find_as<F>(symbol);
  if (!slot && missing->empty()) *missing = symbol;
}

// The loader's search path first (LD_LIBRARY_PATH, ldconfig), then the
// toolkit's usual homes, newest major version first.
std::vector<std::string> candidates() {
  const std::vector<std::string> names = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
  std::vector<std::string> out = names;
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs.push_back(std::string(home) + "/lib64");
  if (const char* path = std::getenv("CUDA_PATH"); path && *path) dirs.push_back(std::string(path) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  for (const std::string& dir : dirs)
    for (const std::string& name : names) out.push_back(dir + "/" + name);
  return out;
}

Loaded load() {
  Loaded loaded;
  std::string attempts;
  DynamicLibrary library = DynamicLibrary::open_first(candidates(), &attempts);
  if (!library.loaded()) {
    loaded.status.reason =
        "libnvrtc not found: install the CUDA toolkit's NVRTC or set CUDA_HOME (" + attempts + ")";
    return loaded;
  }
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

const Loaded& loaded() { return load_once<Loaded, load>(); }

}  // namespace

Status status() { return loaded().status; }

const Api& api() { return api_or_throw(loaded()); }

void check(nvrtcResult result, const char* call) {
  if (result == NVRTC_SUCCESS) return;
  const char* text = api().nvrtcGetErrorString(result);
  throw Error(ErrorCode::runtime, std::string(call) + " failed: " +
                                      (text ? text : "NVRTC error " + std::to_string(result)));
}

}  // namespace flashgen::cuda::nvrtc
