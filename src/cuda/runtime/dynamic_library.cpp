#include "cuda/runtime/dynamic_library.hpp"

#include <dlfcn.h>

namespace flashgen::cuda {

DynamicLibrary DynamicLibrary::open_first(const std::vector<std::string>& candidates,
                                          std::string* attempts) {
  DynamicLibrary library;
  // A copy the process already holds wins (e.g. the NVRTC a framework
  // loaded): two copies of one library side by side can load each other's
  // helper libraries (libnvrtc-builtins) at the wrong version.
  for (const std::string& candidate : candidates) {
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
      library.handle_ = handle;
      library.name_ = candidate;
      library.was_loaded_ = true;
      return library;
    }
  }
  for (const std::string& candidate : candidates) {
    // RTLD_LOCAL: the symbols are reached only through dlsym, never by the
    // dynamic linker, so two versions of a library cannot clash.
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      library.handle_ = handle;
      library.name_ = candidate;
      return library;
    }
    if (attempts) {
      const char* why = dlerror();
      if (!attempts->empty()) *attempts += "; ";
      *attempts += why ? why : candidate + ": not found";
    }
  }
  return library;
}

void* DynamicLibrary::find(const char* symbol) const {
  if (!handle_) return nullptr;
  return dlsym(handle_, symbol);
}

}  // namespace flashgen::cuda
