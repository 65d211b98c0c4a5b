#include "cuda/tensor_maps.hpp"

#include <cstdint>
#include <string>

#include "cuda/runtime/driver_api.hpp"

namespace flashgen::cuda {
namespace {

std::string list(const unsigned long long* values, int count) {
  std::string text;
  for (int i = 0; i < count; ++i) text += (i ? "," : "") + std::to_string(values[i]);
  return text;
}

// Dims fastest first: dim, seq, heads, batch. A dim of size 1 is never
// stepped, but TMA still wants its stride a multiple of 16 bytes: it gets
// the packed one.
flashgen_device::TensorMap encode(const TensorView& t, int box_rows, const char* name) {
  const driver::Api& api = driver::api();
  if (api.cuTensorMapEncodeTiled == nullptr)
    throw Error(ErrorCode::unsupported,
                "copy=tma: the NVIDIA driver has no cuTensorMapEncodeTiled (CUDA 12 or newer "
                "is needed)");
  constexpr std::uint64_t kElementBytes = 2;
  const int order[4] = {3, 1, 2, 0};  // TensorView index of each tensor-map dim
  unsigned long long dims[4], strides[3];
  std::uint64_t packed = kElementBytes;
  for (int i = 0; i < 4; ++i) {
    const int d = order[i];
    dims[i] = static_cast<unsigned long long>(t.shape[d] > 0 ? t.shape[d] : 1);
    if (i > 0) {
      const std::uint64_t own = static_cast<std::uint64_t>(t.stride[d]) * kElementBytes;
      strides[i - 1] = dims[i] > 1 ? own : (packed + 15) / 16 * 16;
    }
    packed *= dims[i];
  }
  const unsigned box[4] = {8, static_cast<unsigned>(box_rows), 1, 1};
  const unsigned element_strides[4] = {1, 1, 1, 1};
  flashgen_device::TensorMap map{};
  const driver::CUresult result = api.cuTensorMapEncodeTiled(
      &map, driver::CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, t.data, dims, strides, box,
      element_strides, driver::CU_TENSOR_MAP_INTERLEAVE_NONE, driver::CU_TENSOR_MAP_SWIZZLE_NONE,
      driver::CU_TENSOR_MAP_L2_PROMOTION_L2_128B, driver::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != driver::CUDA_SUCCESS)
    throw Error(ErrorCode::runtime, std::string("cuTensorMapEncodeTiled failed for ") + name +
                                        " (dims " + list(dims, 4) + ", byte strides " +
                                        list(strides, 3) + ", box 8x" +
                                        std::to_string(box_rows) + "): " +
                                        driver::error_text(result));
  return map;
}

}  // namespace

flashgen_device::TraversedTensorMaps traversed_tensor_maps(const TensorView& first,
                                                           const TensorView& second, int box_rows) {
  return {encode(first, box_rows, "the first traversed tensor"),
          encode(second, box_rows, "the second traversed tensor")};
}

}  // namespace flashgen::cuda
