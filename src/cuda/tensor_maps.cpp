#include "cuda/tensor_maps.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/runtime/driver_api.hpp"

namespace flashgen::cuda {
namespace {

template <class T>
std::string list(const T* values, unsigned count, const char* separator = ",") {
  std::string text = std::to_string(values[0]);
  for (unsigned i = 1; i < count; ++i) text.append(separator).append(std::to_string(values[i]));
  return text;
}

constexpr std::uint64_t kElementBytes = 2;

// `name` and `part` name the map in an error (no string is built otherwise:
// maps are encoded on every call).
flashgen_device::TensorMap encode(const TensorView& t, const TensorMapGeometry& g, int swizzle,
                                  const char* name, const char* part) {
  const driver::Api& api = driver::api();
  if (api.cuTensorMapEncodeTiled == nullptr)
    throw Error(ErrorCode::unsupported,
                "copy=tma: the NVIDIA driver has no cuTensorMapEncodeTiled (CUDA 12 or newer "
                "is needed)");
  const unsigned element_strides[5] = {1, 1, 1, 1, 1};
  flashgen_device::TensorMap map{};
  const driver::CUresult result = api.cuTensorMapEncodeTiled(
      &map, driver::CU_TENSOR_MAP_DATA_TYPE_UINT16, g.rank, t.data, g.dims, g.byte_strides, g.box,
      element_strides, driver::CU_TENSOR_MAP_INTERLEAVE_NONE,
      swizzle == 32 ? driver::CU_TENSOR_MAP_SWIZZLE_32B : driver::CU_TENSOR_MAP_SWIZZLE_NONE,
      driver::CU_TENSOR_MAP_L2_PROMOTION_L2_128B, driver::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != driver::CUDA_SUCCESS) {
    throw Error(ErrorCode::runtime,
                std::string("cuTensorMapEncodeTiled failed for ") + name + part + " (dims " + list(g.dims, g.rank) +
                    ", byte strides " + list(g.byte_strides, g.rank - 1) + ", box " +
                    list(g.box, g.rank, "x") + "): " + driver::error_text(result));
  }
  return map;
}

// The geometry of dims of these sizes (fastest first) and strides in
// elements (the first dim's, 1, not among them): a dim of size 1 gets the
// packed stride instead of its own, which TMA may refuse and never steps.
TensorMapGeometry geometry_of(unsigned rank, const std::int64_t* sizes,
                              const std::int64_t* strides) {
  TensorMapGeometry g{};
  g.rank = rank;
  std::uint64_t packed = kElementBytes;
  for (unsigned i = 0; i < rank; ++i) {
    g.dims[i] = static_cast<unsigned long long>(sizes[i] > 0 ? sizes[i] : 1);
    if (i > 0) {
      const std::uint64_t own = static_cast<std::uint64_t>(strides[i - 1]) * kElementBytes;
      g.byte_strides[i - 1] = g.dims[i] > 1 ? own : (packed + 15) / 16 * 16;
    }
    packed *= g.dims[i];
    g.box[i] = 1;
  }
  return g;
}

// Whole slices of `slice_cols` columns in a row of the tensor.
int whole_slices(const TensorView& t, int slice_cols) {
  return static_cast<int>(t.shape[3] / slice_cols);
}

// Whole slices of `slice_cols` columns in a token's row (all its heads).
int row_slices(const TensorView& t, int slice_cols) {
  return static_cast<int>(t.shape[2] * t.shape[3] / slice_cols);
}

}  // namespace

TensorMapGeometry tensor_map_geometry(const TensorView& t, int box_rows, int box_cols) {
  const std::int64_t sizes[4] = {t.shape[3], t.shape[1], t.shape[2], t.shape[0]};
  const std::int64_t strides[3] = {t.stride[1], t.stride[2], t.stride[0]};
  TensorMapGeometry g = geometry_of(4, sizes, strides);
  g.box[0] = static_cast<unsigned>(box_cols);
  g.box[1] = static_cast<unsigned>(box_rows);
  return g;
}

TensorMapGeometry sliced_tensor_map_geometry(const TensorView& t, int box_rows, int slice_cols) {
  const int slices = whole_slices(t, slice_cols);
  const std::int64_t sizes[5] = {slice_cols, t.shape[1], slices, t.shape[2], t.shape[0]};
  // A row's elements are adjacent (TMA reads no other rows), so a slice
  // starts slice_cols elements after the one before.
  const std::int64_t strides[4] = {t.stride[1], slice_cols, t.stride[2], t.stride[0]};
  TensorMapGeometry g = geometry_of(5, sizes, strides);
  g.box[0] = static_cast<unsigned>(slice_cols);
  g.box[1] = static_cast<unsigned>(box_rows);
  g.box[2] = static_cast<unsigned>(slices);
  return g;
}

TensorMapGeometry sliced_token_row_geometry(const TensorView& t, int box_rows, int slice_cols,
                                            int box_slices) {
  const std::int64_t sizes[4] = {slice_cols, t.shape[1], row_slices(t, slice_cols), t.shape[0]};
  const std::int64_t strides[3] = {t.stride[1], slice_cols, t.stride[0]};
  TensorMapGeometry g = geometry_of(4, sizes, strides);
  g.box[0] = static_cast<unsigned>(slice_cols);
  g.box[1] = static_cast<unsigned>(box_rows);
  g.box[2] = static_cast<unsigned>(box_slices);
  return g;
}

TensorMapGeometry token_row_tensor_map_geometry(const TensorView& t, int box_rows, int box_cols) {
  const std::int64_t sizes[3] = {t.shape[2] * t.shape[3], t.shape[1], t.shape[0]};
  const std::int64_t strides[2] = {t.stride[1], t.stride[0]};
  TensorMapGeometry g = geometry_of(3, sizes, strides);
  g.box[0] = static_cast<unsigned>(box_cols);
  g.box[1] = static_cast<unsigned>(box_rows);
  return g;
}

bool tma_can_read(const TensorView& t) {
  constexpr std::uint64_t kMaxStrideBytes = std::uint64_t{1} << 40;
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 32;
  if (t.numel() == 0) return false;  // a tensor map has no zero extents
  for (int d = 0; d < 4; ++d) {
    if (t.shape[d] > kMaxDim) return false;
    if (d == 3 || t.shape[d] <= 1) continue;  // the row's own elements, or never stepped
    const std::uint64_t bytes = static_cast<std::uint64_t>(t.stride[d]) * 2;
    if (t.stride[d] <= 0 || bytes >= kMaxStrideBytes) return false;
  }
  return true;
}

bool tma_can_read_token_rows(const TensorView& t) {
  if (!tma_can_read(t)) return false;
  const bool heads_adjacent = t.shape[2] <= 1 || t.stride[2] == t.shape[3];
  const bool dims_adjacent = t.shape[3] <= 1 || t.stride[3] == 1;
  if (!heads_adjacent || !dims_adjacent) return false;
  if (t.shape[2] * t.shape[3] > (std::int64_t{1} << 32)) return false;
  if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0) return false;
  for (int d = 0; d < 2; ++d)  // batch, seq: the steps TMA takes in bytes
    if (t.shape[d] > 1 && t.stride[d] * kElementBytes % 16 != 0) return false;
  return true;
}

flashgen_device::TraversedTensorMaps traversed_tensor_maps(const TensorView& first,
                                                           const TensorView& second, int box_rows,
                                                           int swizzle,
                                                           const TokenRowTiles* tiles) {
  const int slice_cols = flashgen_device::tma_slice_columns(swizzle);
  flashgen_device::TraversedTensorMaps maps{};
  const TensorView* tensors[2] = {&first, &second};
  for (int i = 0; i < 2; ++i) {
    const TensorView& t = *tensors[i];
    const char* name = i == 0 ? "the first traversed tensor" : "the second traversed tensor";
    if (tiles != nullptr) {
      maps.view[i] = encode(t, token_row_tensor_map_geometry(t, box_rows, slice_cols), swizzle,
                            name, "'s token rows");
      // A head's columns span the fewest slices where they start at a
      // slice's first column, one more where they start late in it: a box
      // of each, neither wider than the kernel's tile nor the row.
      const int fewest = static_cast<int>((t.shape[3] + slice_cols - 1) / slice_cols);
      maps.row_slices[i] = row_slices(t, slice_cols);
      const int most = std::min(tiles->cols[i] / slice_cols, maps.row_slices[i]);
      const auto encode_boxes = [&](int slices, flashgen_device::TensorMap& map, int& count) {
        if (slices > most) return;
        map = encode(t, sliced_token_row_geometry(t, box_rows, slice_cols, slices), swizzle, name,
                     "'s token rows in slices");
        count = slices;
      };
      encode_boxes(fewest, maps.sliced[i], maps.box_slices[i]);
      encode_boxes(fewest + 1, maps.sliced_wide[i], maps.wide_slices[i]);
      continue;
    }
    maps.view[i] = encode(t, tensor_map_geometry(t, box_rows, slice_cols), swizzle, name, "");
    if (whole_slices(t, slice_cols) > 0)
      maps.sliced[i] = encode(t, sliced_tensor_map_geometry(t, box_rows, slice_cols), swizzle,
                              name, "'s whole slices");
  }
  return maps;
}

}  // namespace flashgen::cuda
