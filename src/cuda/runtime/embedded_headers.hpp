// The device headers (src/cuda/device/**/*.cuh) embedded at build time.
#pragma once

#include <string>
#include <vector>

namespace flashgen::cuda {

struct EmbeddedHeader {
  const char* name;  // the path under src/cuda/device: "kernels/forward/wgmma.cuh"
  const char* text;
};
const std::vector<EmbeddedHeader>& embedded_device_headers();
// SHA-256 over every header's name and text; part of every kernel cache key.
const char* embedded_device_headers_hash();

}  // namespace flashgen::cuda
