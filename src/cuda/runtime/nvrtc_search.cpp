#include "cuda/runtime/nvrtc_search.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace flashgen::cuda::nvrtc {
namespace {

namespace fs = std::filesystem;

// The CUDA 13 wheel holds libnvrtc.so.13, the CUDA 12 one libnvrtc.so.12.
struct WheelLayout {
  const char* folder;
  const char* file;
};
constexpr WheelLayout kWheels[] = {{"nvidia/cu13/lib", "libnvrtc.so.13"},
                                   {"nvidia/cuda_nvrtc/lib", "libnvrtc.so.12"}};
constexpr const char* kSonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
// site-packages/flashgen/_lib/lib/libflashgen.so is three folders below
// site-packages; one more covers a package laid out one level deeper.
constexpr int kAncestorsSearched = 4;

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The folder of the object that holds this code: libflashgen.so, or the
// executable that links the library statically (the CLI in a wheel).
std::string own_directory() {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&own_directory), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0)
    return "";
  std::error_code error;
  // The main program's link map has an empty name; /proc names it exactly.
  const fs::path file = (map && map->l_name && *map->l_name)
                            ? fs::path(map->l_name)
                            : fs::read_symlink("/proc/self/exe", error);
  if (error || file.empty()) return "";
  const fs::path resolved = fs::weakly_canonical(file, error);
  return (error ? file : resolved).parent_path().string();
}

}  // namespace

SearchRoots search_roots() {
  return {own_directory(), environment("CUDA_HOME"), environment("CUDA_PATH")};
}

std::vector<LibraryCandidate> candidates(const SearchRoots& roots) {
  std::vector<LibraryCandidate> out;
  std::error_code error;
  if (!roots.own_directory.empty()) {
    fs::path ancestor = roots.own_directory;
    for (int level = 0; level <= kAncestorsSearched && !ancestor.empty(); ++level) {
      for (const WheelLayout& wheel : kWheels) {
        const fs::path file = ancestor / wheel.folder / wheel.file;
        if (fs::exists(file, error)) out.push_back({file.string(), "pip wheel"});
      }
      if (ancestor == ancestor.parent_path()) break;
      ancestor = ancestor.parent_path();
    }
  }
  std::vector<std::string> toolkits;
  if (!roots.cuda_home.empty()) toolkits.push_back(roots.cuda_home);
  if (!roots.cuda_path.empty()) toolkits.push_back(roots.cuda_path);
  toolkits.push_back("/usr/local/cuda");
  for (const std::string& toolkit : toolkits)
    for (const char* soname : kSonames)
      out.push_back({(fs::path(toolkit) / "lib64" / soname).string(), "CUDA toolkit"});
  for (const char* soname : kSonames) out.push_back({soname, "loader path"});
  return out;
}

}  // namespace flashgen::cuda::nvrtc
