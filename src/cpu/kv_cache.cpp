#include "cpu/kv_cache.hpp"

#include <cstring>

#include "common/dtype.hpp"

namespace flashgen::cpu {
namespace {

// Element offset of row t of sequence b, head h, in the cache.
std::int64_t row_offset(const CacheRows& where, std::int64_t b, std::int64_t t, std::int64_t h) {
  const TensorView& c = where.cache;
  if (where.block_table == nullptr) return b * c.stride[0] + t * c.stride[1] + h * c.stride[2];
  const std::int64_t page = where.block_table->at(b, t / where.page_size);
  return page * c.stride[0] + t % where.page_size * c.stride[1] + h * c.stride[2];
}

// dim elements from (src, offset, stride) to (dst, offset, stride); where
// the dtypes differ, one of them an e4m3 cache of this scale, each value
// divided by it on the way in and multiplied on the way out (in fp32, then
// rounded to the destination's dtype).
void copy_row(const TensorView& dst, std::int64_t dst_at, const TensorView& src,
              std::int64_t src_at, float scale) {
  if (dst.dtype != src.dtype) {
    for (std::int64_t d = 0; d < src.shape[3]; ++d) {
      const float x = load_as_float(src.data, src.dtype, src_at + d * src.stride[3]);
      store_from_float(dst.data, dst.dtype, dst_at + d * dst.stride[3],
                       dst.dtype == DType::e4m3 ? x / scale : x * scale);
    }
    return;
  }
  const std::size_t element = size_of(src.dtype);
  auto* to = static_cast<unsigned char*>(dst.data) + dst_at * element;
  const auto* from = static_cast<const unsigned char*>(src.data) + src_at * element;
  if (dst.stride[3] == 1 && src.stride[3] == 1) {
    std::memcpy(to, from, src.shape[3] * element);
    return;
  }
  for (std::int64_t d = 0; d < src.shape[3]; ++d)
    std::memcpy(to + d * dst.stride[3] * element, from + d * src.stride[3] * element, element);
}

}  // namespace

float cache_scale(const HeadVectorView* scale, std::int64_t h) {
  if (scale == nullptr || !scale->given()) return 1.0f;
  return scale->data[scale->shape[0] == 1 ? 0 : h * scale->stride[0]];
}

void append_rows(const CacheRows& where, const TensorView& rows,
                 const std::vector<std::int64_t>& lengths) {
  for (std::int64_t b = 0; b < rows.shape[0]; ++b)
    for (std::int64_t i = 0; i < rows.shape[1]; ++i)
      for (std::int64_t h = 0; h < rows.shape[2]; ++h)
        copy_row(where.cache, row_offset(where, b, lengths[b] + i, h), rows,
                 b * rows.stride[0] + i * rows.stride[1] + h * rows.stride[2],
                 cache_scale(where.scale, h));
}

TensorView gather_rows(const CacheRows& where, std::int64_t b, std::int64_t count,
                       std::vector<unsigned char>& buffer, DType into) {
  const TensorView& c = where.cache;
  buffer.resize(static_cast<std::size_t>(count * c.shape[2] * c.shape[3]) * size_of(into));
  const TensorView packed = TensorView::bshd(buffer.data(), into, 1, count, c.shape[2],
                                             c.shape[3], MemoryKind::host);
  for (std::int64_t t = 0; t < count; ++t)
    for (std::int64_t h = 0; h < c.shape[2]; ++h)
      copy_row(packed, t * packed.stride[1] + h * packed.stride[2], c, row_offset(where, b, t, h),
               cache_scale(where.scale, h));
  return packed;
}

}  // namespace flashgen::cpu
