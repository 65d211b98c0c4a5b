// `flashgen info`: what this machine offers the library.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arguments.hpp"
#include "commands.hpp"
#include "cuda/runtime/nvrtc_api.hpp"
#include "cuda/runtime/runtime.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cli {
namespace {

struct GpuLine {
  std::string name, compute_capability, arch, driver;
  int sm_count = 0;
};

// Queries that throw where there is no driver or device become text.
std::vector<GpuLine> gpus(std::string* why_none) {
  std::vector<GpuLine> lines;
  try {
    const int count = cuda::device_count();
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      const cuda::DeviceInfo& d = cuda::device_info(ordinal);
      lines.push_back({d.name, std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor),
                       d.arch(), d.driver_version, d.sm_count});
    }
    if (count == 0) *why_none = "no CUDA device";
  } catch (const std::exception& error) {
    *why_none = error.what();
  }
  return lines;
}

std::string nvrtc(bool* ok) {
  try {
    *ok = true;
    return cuda::nvrtc_version();
  } catch (const std::exception& error) {
    *ok = false;
    return error.what();
  }
}

// Which place of the search order (pip wheel, CUDA toolkit, loader path) gave
// NVRTC, and the file: "(pip wheel: .../nvidia/cu13/lib/libnvrtc.so.13)".
std::string nvrtc_source(const cuda::nvrtc::Status& status) {
  if (!status.ok) return "";
  return " (" + status.origin + ": " + status.library + ")";
}

}  // namespace

int info_command(const std::vector<std::string>& words) {
  Arguments arguments("info", "[--json]",
                      "Prints the backends this machine can run, its GPUs (name, compute\n"
                      "capability, NVRTC target), the NVRTC version and where it was found (pip\n"
                      "wheel, CUDA toolkit or loader path, in that order of search), the kernel\n"
                      "cache directory, the CPU threads and the CPU backend's instruction set.");
  arguments.flag("json", "print one JSON object instead of text");
  if (!arguments.parse(words)) return kExitOk;

  const SystemInfo info = system_info();
  std::string why_no_gpu;
  const std::vector<GpuLine> devices = gpus(&why_no_gpu);
  bool nvrtc_ok = false;
  const std::string nvrtc_text = nvrtc(&nvrtc_ok);
  const cuda::nvrtc::Status nvrtc_status = cuda::nvrtc::status();

  if (arguments.given("json")) {
    nlohmann::json out;
    out["version"] = info.version;
    out["backends"] = info.cuda_available ? nlohmann::json{"cpu", "cuda"} : nlohmann::json{"cpu"};
    out["cuda_available"] = info.cuda_available;
    out["cuda_status"] = info.cuda_status;
    out["gpus"] = nlohmann::json::array();
    for (const GpuLine& g : devices)
      out["gpus"].push_back({{"name", g.name},
                             {"compute_capability", g.compute_capability},
                             {"arch", g.arch},
                             {"sm_count", g.sm_count},
                             {"driver", g.driver}});
    if (devices.empty()) out["gpu_status"] = why_no_gpu;
    out[nvrtc_ok ? "nvrtc" : "nvrtc_status"] = nvrtc_text;
    if (nvrtc_ok) {
      out["nvrtc_library"] = nvrtc_status.library;
      out["nvrtc_origin"] = nvrtc_status.origin;
    }
    out["cache_dir"] = info.cache_dir;
    out["cpu_threads"] = info.cpu_threads;
    out["cpu_isa"] = info.cpu_isa;
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }

  std::printf("flashgen %s\n", info.version.c_str());
  std::printf("%-14s cpu%s\n", "backends:", info.cuda_available ? ", cuda" : "");
  if (!info.cuda_available)
    std::printf("%-14s unavailable: %s\n", "cuda:", info.cuda_status.c_str());
  else
    std::printf("%-14s %s\n", "cuda:", info.cuda_status.c_str());
  if (devices.empty()) {
    // The reason is usually the one the cuda line just gave.
    if (why_no_gpu == info.cuda_status)
      std::printf("%-14s none\n", "GPU:");
    else
      std::printf("%-14s none (%s)\n", "GPU:", why_no_gpu.c_str());
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const GpuLine& g = devices[i];
    const std::string label = "GPU " + std::to_string(i) + ":";
    std::printf("%-14s %s, compute capability %s (%s), %d SMs, driver %s\n", label.c_str(),
                g.name.c_str(), g.compute_capability.c_str(), g.arch.c_str(), g.sm_count,
                g.driver.c_str());
  }
  std::printf("%-14s %s%s%s\n", "NVRTC:", nvrtc_ok ? "" : "unavailable: ", nvrtc_text.c_str(),
              nvrtc_source(nvrtc_status).c_str());
  std::printf("%-14s %s\n", "cache:", info.cache_dir.c_str());
  std::printf("%-14s %d\n", "CPU threads:", info.cpu_threads);
  std::printf("%-14s %s\n", "CPU kernels:", info.cpu_isa.c_str());
  return kExitOk;
}

}  // namespace flashgen::cli
