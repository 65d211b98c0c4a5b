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

flashgen_device::TensorMap encode(const TensorView& t, int box_rows, int swizzle,
                                  const char* name) {
  const driver::Api& api = driver::api();
  if (api.cuTensorMapEncodeTiled == nullptr)
    throw Error(ErrorCode::unsupported,
                "copy=tma: the NVIDIA driver has no cuTensorMapEncodeTiled (CUDA 12 or newer "
                "is needed)");
  const int box_cols = flashgen_device::tma_slice_columns(swizzle);
  TensorMapGeometry g = tensor_map_geometry(t, box_rows, box_cols);
  const unsigned element_strides[4] = {1, 1, 1, 1};
  flashgen_device::TensorMap map{};
  const driver::CUresult result = api.cuTensorMapEncodeTiled(
      &map, driver::CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, t.data, g.dims, g.byte_strides, g.box,
      element_strides, driver::CU_TENSOR_MAP_INTERLEAVE_NONE,
      swizzle == 32 ? driver::CU_TENSOR_MAP_SWIZZLE_32B : driver::CU_TENSOR_MAP_SWIZZLE_NONE,
      driver::CU_TENSOR_MAP_L2_PROMOTION_L2_128B, driver::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != driver::CUDA_SUCCESS)
    throw Error(ErrorCode::runtime, std::string("cuTensorMapEncodeTiled failed for ") + name +
                                        " (dims " + list(g.dims, 4) + ", byte strides " +
                                        list(g.byte_strides, 3) + ", box " +
                                        std::to_string(box_cols) + "x" + std::to_string(box_rows) +
                                        "): " + driver::error_text(result));
  return map;
}

}  // namespace

TensorMapGeometry tensor_map_geometry(const TensorView& t, int box_rows, int box_cols) {
  constexpr std::uint64_t kElementBytes = 2;
  const int order[4] = {3, 1, 2, 0};  // TensorView index of each tensor-map dim
  TensorMapGeometry g{};
  std::uint64_t packed = kElementBytes;
  for (int i = 0; i < 4; ++i) {
    const int d = order[i];
    g.dims[i] = static_cast<unsigned long long>(t.shape[d] > 0 ? t.shape[d] : 1);
    if (i > 0) {
      const std::uint64_t own = static_cast<std::uint64_t>(t.stride[d]) * kElementBytes;
      g.byte_strides[i - 1] = g.dims[i] > 1 ? own : (packed + 15) / 16 * 16;
    }
    packed *= g.dims[i];
  }
  g.box[0] = static_cast<unsigned>(box_cols);
  g.box[1] = static_cast<unsigned>(box_rows);
  g.box[2] = g.box[3] = 1;
  return g;
}

bool tma_can_read(const TensorView& t) {
  constexpr std::uint64_t kMaxStrideBytes = std::uint64_t{1} << 40;
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 32;
  for (int d = 0; d < 4; ++d) {
    if (t.shape[d] > kMaxDim) return false;
    if (d == 3 || t.shape[d] <= 1) continue;  // the row's own elements, or never stepped
    const std::uint64_t bytes = static_cast<std::uint64_t>(t.stride[d]) * 2;
    if (t.stride[d] <= 0 || bytes >= kMaxStrideBytes) return false;
  }
  return true;
}

flashgen_device::TraversedTensorMaps traversed_tensor_maps(const TensorView& first,
                                                           const TensorView& second, int box_rows,
                                                           int swizzle) {
  return {encode(first, box_rows, swizzle, "the first traversed tensor"),
          encode(second, box_rows, swizzle, "the second traversed tensor")};
}

}  // namespace flashgen::cuda
