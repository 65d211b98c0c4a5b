// NVRTC compilation of one generated translation unit against the embedded
// device headers, and the cache key that names its result.
#pragma once

#include <string>
#include <vector>

#include "cuda/runtime/cubin_cache.hpp"
#include "cuda/runtime/runtime.hpp"

namespace flashgen::cuda {

// Every option NVRTC gets for `request`, in order: the fixed ones, then
// request.options.
std::vector<std::string> nvrtc_options(const CompileRequest& request);

// The key text covers the name, entry, arch, options, the source's SHA-256,
// the device headers' hash, the NVRTC version and the library version.
KernelKey make_kernel_key(const CompileRequest& request, const std::string& nvrtc_version);

// Compiles to a cubin; throws flashgen::Error(runtime) with the NVRTC log and
// the first lines of the source when compilation fails, Error(unsupported)
// when NVRTC is missing, Error(invalid_argument) for an incomplete request.
CubinArtifact compile_to_cubin(const CompileRequest& request);

// With FLASHGEN_DUMP_SOURCE=dir set, writes dir/<name>.cu and dir/<name>.log
// (name made file-safe); failures to write are ignored.
void dump_if_requested(const CompileRequest& request, const std::string& log);

// `name` with every character outside [A-Za-z0-9._-] replaced by '_' and
// clipped to a length every file system accepts.
std::string file_safe_name(const std::string& name);

}  // namespace flashgen::cuda
