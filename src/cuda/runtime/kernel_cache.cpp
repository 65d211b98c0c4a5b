// get_kernel: the in-process cache (key -> loaded function per device) in
// front of the on-disk cubin cache in front of NVRTC.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/runtime/compiler.hpp"
#include "cuda/runtime/cubin_cache.hpp"
#include "cuda/runtime/driver_api.hpp"
#include "cuda/runtime/runtime.hpp"
#include "flashgen/flashgen.hpp"

#ifndef FLASHGEN_VERSION
#define FLASHGEN_VERSION "unknown"
#endif

namespace flashgen::cuda {
namespace {

// One kernel on one device. Its mutex serialises the build, so threads asking
// for different kernels compile in parallel and one kernel is built once.
struct Entry {
  std::mutex mutex;
  bool loaded = false;
  std::size_t shared_limit = 0;  // dynamic shared bytes the function is opted in to
  CompiledKernel kernel;
};

// In-process lookup by the request's exact text: a hit costs one string hash,
// no SHA-256. The NVRTC version and device headers cannot change within a
// process, so only the disk key needs them.
class LoadedKernels {
 public:
  Entry& entry(const CompileRequest& request, int ordinal) {
    std::string key = lookup_key(request, ordinal);
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<Entry>& slot = entries_[key];
    if (!slot) slot = std::make_unique<Entry>();
    return *slot;  // stable: entries are never erased and live on the heap
  }

 private:
  static std::string lookup_key(const CompileRequest& request, int ordinal) {
    // NVRTC reads every field as a C string, so none holds a '\0': the
    // separator keeps fields from running together.
    std::string key = std::to_string(ordinal);
    for (const std::string* field : {&request.name, &request.entry, &request.arch})
      key.append(1, '\0').append(*field);
    for (const std::string& option : request.options) key.append(1, '\0').append(option);
    key.append(1, '\0').append(request.source);
    return key;
  }

  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<Entry>> entries_;
};

LoadedKernels& loaded_kernels() {
  static LoadedKernels* kernels = new LoadedKernels();  // leaked on purpose: used until exit
  return *kernels;
}

void load_into_device(const CompileRequest& request, const CubinArtifact& artifact, int ordinal,
                      Entry* entry) {
  const driver::Api& api = driver::api();
  use_device(ordinal);
  driver::CUmodule module = nullptr;  // kept for the process: its functions are cached
  driver::check(api.cuModuleLoadData(&module, artifact.cubin.data()),
                ("cuModuleLoadData(" + request.name + ", " + request.arch + ")").c_str());
  driver::CUfunction function = nullptr;
  driver::check(api.cuModuleGetFunction(&function, module, request.entry.c_str()),
                ("cuModuleGetFunction(" + request.entry + ")").c_str());
  CompiledKernel& kernel = entry->kernel;
  kernel.function = function;
  kernel.ordinal = ordinal;
  kernel.resources = artifact.resources;
  kernel.log = artifact.log;
  // The loaded function is the authority on registers and local memory; the
  // log is only parsed, and a future ptxas may word it differently.
  int registers = 0;
  driver::check(api.cuFuncGetAttribute(&registers, driver::CU_FUNC_ATTRIBUTE_NUM_REGS, function),
                "cuFuncGetAttribute(NUM_REGS)");
  kernel.resources.registers = registers;
  int static_shared = 0;
  driver::check(api.cuFuncGetAttribute(&static_shared, driver::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                       function),
                "cuFuncGetAttribute(SHARED_SIZE_BYTES)");
  kernel.resources.static_shared_bytes = static_shared;
}

void raise_shared_limit(const CompileRequest& request, int ordinal, std::size_t bytes,
                        Entry* entry) {
  if (bytes <= entry->shared_limit) return;
  const DeviceInfo& info = device_info(ordinal);
  std::size_t static_bytes = std::size_t(entry->kernel.resources.static_shared_bytes);
  if (bytes + static_bytes > info.shared_per_block_optin)
    throw Error(ErrorCode::unsupported,
                request.name + " needs " + std::to_string(bytes) + " bytes of dynamic + " +
                    std::to_string(static_bytes) + " bytes of static shared memory; " + info.name +
                    " allows " + std::to_string(info.shared_per_block_optin) + " per block");
  use_device(ordinal);
  driver::check(driver::api().cuFuncSetAttribute(
                    entry->kernel.function, driver::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    int(bytes)),
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  entry->shared_limit = bytes;
}

}  // namespace

std::string cache_dir(const std::string& arch) {
  if (const char* dir = std::getenv("FLASHGEN_CACHE_DIR"); dir && *dir) return dir;
  std::string base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    base = std::string(home) + "/.cache";
  } else {
    return "";  // nowhere to keep files: in-memory cache only
  }
  return base + "/flashgen/" + FLASHGEN_VERSION + "/" + arch;
}

namespace {

// The disk cache in front of NVRTC. With FLASHGEN_VERBOSE=1 each kernel
// built or read says so on stderr, with the time it took: a process's first
// calls pause for NVRTC (about a second per kernel), and this tells why and
// where the cubins went.
CubinArtifact load_or_build(const CompileRequest& request, bool* from_disk) {
  const std::string dir = cache_dir(request.arch);
  const auto start = std::chrono::steady_clock::now();
  CubinArtifact artifact = CubinCache(dir).load_or_build(
      make_kernel_key(request, nvrtc_version()), [&] { return compile_to_cubin(request); },
      from_disk);
  const char* verbose = std::getenv("FLASHGEN_VERBOSE");
  if (verbose && std::string(verbose) == "1") {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "flashgen: %s %s for %s in %.2f s (%s)\n",
                 *from_disk ? "loaded" : "compiled", request.name.c_str(), request.arch.c_str(),
                 seconds, dir.empty() ? "no kernel cache directory" : ("cache " + dir).c_str());
  }
  return artifact;
}

}  // namespace

bool precompile(const CompileRequest& request, KernelResources* resources) {
  bool from_disk = false;
  const CubinArtifact artifact = load_or_build(request, &from_disk);
  if (resources != nullptr) *resources = artifact.resources;
  return from_disk;
}

const CompiledKernel& get_kernel(const CompileRequest& request, int ordinal,
                                 std::size_t dynamic_shared_bytes) {
  const DeviceInfo& info = device_info(ordinal);  // checks the driver and the ordinal
  if (request.arch.empty()) {
    CompileRequest for_device = request;
    for_device.arch = info.arch();
    return get_kernel(for_device, ordinal, dynamic_shared_bytes);
  }
  Entry& entry = loaded_kernels().entry(request, ordinal);
  std::lock_guard<std::mutex> lock(entry.mutex);
  if (!entry.loaded) {
    bool from_disk = false;
    CubinArtifact artifact = load_or_build(request, &from_disk);
    // A disk hit skipped the compiler; still honour the dump request.
    if (from_disk) dump_if_requested(request, artifact.log);
    load_into_device(request, artifact, ordinal, &entry);
    entry.loaded = true;
  }
  raise_shared_limit(request, ordinal, dynamic_shared_bytes, &entry);
  return entry.kernel;
}

}  // namespace flashgen::cuda
