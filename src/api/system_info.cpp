// Environment facts for `flashgen info`. Every CUDA query may throw where
// there is no driver, device or NVRTC; those become text, never failures.
#include <cstdlib>
#include <string>
#include <thread>

#include "cpu/isa_dispatch.hpp"
#include "cpu/tile_kernels.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/runtime/runtime.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen {
namespace {

// The cache root when no device names an arch: $FLASHGEN_CACHE_DIR, else
// ~/.cache/flashgen/<version>/ (the runtime appends <arch>/ per device).
std::string default_cache_dir() {
  if (const char* dir = std::getenv("FLASHGEN_CACHE_DIR"); dir != nullptr && *dir != '\0')
    return dir;
  std::string home;
  if (const char* value = std::getenv("HOME"); value != nullptr) home = value;
  return home + "/.cache/flashgen/" + version() + "/";
}

std::string describe_device(const cuda::DeviceInfo& device) {
  return device.name + " (sm_" + std::to_string(device.cc_major) +
         std::to_string(device.cc_minor) + ", " + std::to_string(device.sm_count) + " SMs)";
}

}  // namespace

SystemInfo system_info() {
  SystemInfo info;
  info.version = version();
  const unsigned hardware = std::thread::hardware_concurrency();
  info.cpu_threads = hardware > 0 ? static_cast<int>(hardware) : 1;
  info.cpu_isa = cpu::choose_tile_kernels(std::getenv("FLASHGEN_CPU_ISA")).kernels->name;
  info.cache_dir = default_cache_dir();

  try {
    const cuda::Availability available = cuda::availability();
    info.cuda_available = available.ok;
    info.cuda_status = available.ok ? "available" : available.reason;
  } catch (const std::exception& error) {
    info.cuda_available = false;
    info.cuda_status = error.what();
  }

  std::string driver, nvrtc;
  try {
    info.device_count = cuda::device_count();
    for (int ordinal = 0; ordinal < info.device_count; ++ordinal) {
      const cuda::DeviceInfo& device = cuda::device_info(ordinal);
      info.devices.push_back(describe_device(device));
      if (ordinal == 0) {
        driver = device.driver_version;
        info.cache_dir = cuda::cache_dir(device.arch());
      }
    }
  } catch (const std::exception&) {
    info.device_count = static_cast<int>(info.devices.size());  // those listed before the failure
  }
  try {
    nvrtc = cuda::nvrtc_version();
  } catch (const std::exception&) {
  }
  if (info.cuda_available)
    info.cuda_status = "driver " + (driver.empty() ? std::string("?") : driver) + ", NVRTC " +
                       (nvrtc.empty() ? std::string("?") : nvrtc);
  return info;
}

}  // namespace flashgen
