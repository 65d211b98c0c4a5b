#include "cuda/runtime/compiler.hpp"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cuda/runtime/embedded_headers.hpp"
#include "cuda/runtime/nvrtc_api.hpp"
#include "cuda/runtime/ptxas_log.hpp"
#include "cuda/runtime/sha256.hpp"
#include "flashgen/flashgen.hpp"

#ifndef FLASHGEN_VERSION
#define FLASHGEN_VERSION "unknown"
#endif

namespace flashgen::cuda {
namespace {

// How much of the source a compile error quotes.
constexpr int kQuotedSourceLines = 40;
// File names stay well under NAME_MAX (255) with room for suffixes.
constexpr std::size_t kMaxFileNameChars = 180;

void require(bool ok, const char* field, const char* rule) {
  if (!ok)
    throw Error(ErrorCode::invalid_argument,
                std::string("CompileRequest.") + field + " " + rule);
}

void validate(const CompileRequest& request) {
  require(!request.name.empty(), "name", "must not be empty");
  require(!request.source.empty(), "source", "must not be empty");
  require(!request.entry.empty(), "entry", "must name the extern \"C\" __global__ function");
  require(request.arch.rfind("sm_", 0) == 0, "arch",
          ("must look like \"sm_90a\" or \"sm_80\" (got \"" + request.arch + "\")").c_str());
}

std::string numbered_head(const std::string& source, int lines) {
  std::istringstream in(source);
  std::ostringstream out;
  std::string line;
  for (int n = 1; n <= lines && std::getline(in, line); ++n) {
    char number[16];
    std::snprintf(number, sizeof(number), "%4d| ", n);
    out << number << line << '\n';
  }
  return out.str();
}

// Owns an nvrtcProgram so every exit path destroys it.
class Program {
 public:
  Program(const nvrtc::Api& api, const CompileRequest& request) : api_(api) {
    const auto& headers = embedded_device_headers();
    std::vector<const char*> names, texts;
    for (const EmbeddedHeader& h : headers) {
      names.push_back(h.name);
      texts.push_back(h.text);
    }
    std::string file = file_safe_name(request.name) + ".cu";
    nvrtc::check(api_.nvrtcCreateProgram(&program_, request.source.c_str(), file.c_str(),
                                         int(headers.size()), texts.data(), names.data()),
                 "nvrtcCreateProgram");
  }
  ~Program() {
    if (program_) api_.nvrtcDestroyProgram(&program_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtc::nvrtcProgram get() const { return program_; }

  std::string log() const {
    std::size_t bytes = 0;
    nvrtc::check(api_.nvrtcGetProgramLogSize(program_, &bytes), "nvrtcGetProgramLogSize");
    std::string text(bytes, '\0');
    if (bytes > 0) nvrtc::check(api_.nvrtcGetProgramLog(program_, text.data()), "nvrtcGetProgramLog");
    while (!text.empty() && text.back() == '\0') text.pop_back();
    return text;
  }

  std::string cubin() const {
    std::size_t bytes = 0;
    nvrtc::check(api_.nvrtcGetCUBINSize(program_, &bytes), "nvrtcGetCUBINSize");
    std::string image(bytes, '\0');
    if (bytes > 0) nvrtc::check(api_.nvrtcGetCUBIN(program_, image.data()), "nvrtcGetCUBIN");
    return image;
  }

 private:
  const nvrtc::Api& api_;
  nvrtc::nvrtcProgram program_ = nullptr;
};

}  // namespace

std::string file_safe_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    out += keep ? c : '_';
    if (out.size() == kMaxFileNameChars) break;
  }
  return out.empty() ? "kernel" : out;
}

std::vector<std::string> nvrtc_options(const CompileRequest& request) {
  std::vector<std::string> options = {
      "--gpu-architecture=" + request.arch,
      "-std=c++17",
      // Every function is device code: the headers need no __device__ noise.
      "-default-device",
      // The verbose ptxas report is parsed into KernelResources (registers, spills).
      "--ptxas-options=-v",
      // Source lines in profiles; does not change the generated code.
      "-lineinfo",
  };
  // No --use_fast_math: IEEE division/sqrt/exp unless device code asks for
  // an approximation explicitly, so accuracy is decided where it is visible.
  options.insert(options.end(), request.options.begin(), request.options.end());
  return options;
}

KernelKey make_kernel_key(const CompileRequest& request, const std::string& nvrtc_version) {
  std::ostringstream text;
  text << "flashgen kernel\n"
       << "name: " << request.name << '\n'
       << "entry: " << request.entry << '\n'
       << "arch: " << request.arch << '\n';
  for (const std::string& option : nvrtc_options(request)) text << "option: " << option << '\n';
  text << "source_sha256: " << sha256_hex(request.source) << '\n'
       << "device_headers_sha256: " << embedded_device_headers_hash() << '\n'
       << "nvrtc: " << nvrtc_version << '\n'
       << "library: " << FLASHGEN_VERSION << '\n';
  return make_key(text.str());
}

CubinArtifact compile_to_cubin(const CompileRequest& request) {
  validate(request);
  const nvrtc::Api& api = nvrtc::api();
  Program program(api, request);
  std::vector<std::string> options = nvrtc_options(request);
  std::vector<const char*> option_pointers;
  for (const std::string& o : options) option_pointers.push_back(o.c_str());
  nvrtc::nvrtcResult result =
      api.nvrtcCompileProgram(program.get(), int(option_pointers.size()), option_pointers.data());
  CubinArtifact artifact;
  artifact.log = program.log();
  dump_if_requested(request, artifact.log);
  if (result != nvrtc::NVRTC_SUCCESS) {
    const char* what = api.nvrtcGetErrorString(result);
    std::ostringstream message;
    message << "NVRTC could not compile " << request.name << " for " << request.arch << " ("
            << (what ? what : "error") << "):\n"
            << artifact.log << "\nsource (first " << kQuotedSourceLines << " lines):\n"
            << numbered_head(request.source, kQuotedSourceLines);
    throw Error(ErrorCode::runtime, message.str());
  }
  artifact.cubin = program.cubin();
  if (!parse_ptxas_log(artifact.log, request.entry, &artifact.resources)) {
    // The report lists every entry ptxas compiled; a missing name would only
    // surface later as cuModuleGetFunction failing on the GPU machine.
    std::vector<std::string> entries = ptxas_entry_names(artifact.log);
    if (!entries.empty()) {
      std::string found;
      for (const std::string& e : entries) found += (found.empty() ? "" : ", ") + e;
      throw Error(ErrorCode::invalid_argument,
                  "CompileRequest.entry \"" + request.entry + "\" names no extern \"C\" "
                  "__global__ function of " + request.name + " (found: " + found + ")");
    }
  }
  return artifact;
}

void dump_if_requested(const CompileRequest& request, const std::string& log) {
  const char* dir = std::getenv("FLASHGEN_DUMP_SOURCE");
  if (!dir || !*dir) return;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return;
  std::filesystem::path stem = std::filesystem::path(dir) / file_safe_name(request.name);
  std::ofstream(stem.string() + ".cu", std::ios::binary) << request.source;
  std::ofstream(stem.string() + ".log", std::ios::binary) << log;
}

CompiledKernel compile_only(const CompileRequest& request) {
  CubinArtifact artifact = compile_to_cubin(request);
  CompiledKernel kernel;
  kernel.resources = artifact.resources;
  kernel.log = std::move(artifact.log);
  return kernel;
}

std::string nvrtc_version() {
  nvrtc::api();  // throws with the reason when libnvrtc is missing
  nvrtc::Status s = nvrtc::status();
  return std::to_string(s.major) + "." + std::to_string(s.minor);
}

}  // namespace flashgen::cuda
