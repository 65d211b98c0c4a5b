#include "cpu/tile_io.hpp"

#include <algorithm>
#include <string>

#include "common/dtype.hpp"
#include "common/problem.hpp"
#include "cpu/tile_math.hpp"

namespace flashgen::cpu {
namespace {

template <DType kType>
float load_element(const void* base, std::int64_t offset) {
  return load_as_float(base, kType, offset);
}

template <DType kType>
void store_element(void* base, std::int64_t offset, float value) {
  store_from_float(base, kType, offset, value);
}

// Calls body.template operator()<kType>() with the view's dtype as a
// compile-time constant, so the per-element conversions inline.
template <class Body>
void dispatch_dtype(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::f16:
      body.template operator()<DType::f16>();
      return;
    case DType::bf16:
      body.template operator()<DType::bf16>();
      return;
    case DType::f32:
      body.template operator()<DType::f32>();
      return;
    case DType::e4m3:  // a KV cache's storage, converted by the cache's own reads
      break;
  }
  throw Error(ErrorCode::runtime, std::string("tile reads and writes take f16, bf16 or f32; got ") +
                                      to_string(dtype));
}

std::int64_t row_offset(const Strides4& s, std::int64_t batch, std::int64_t row,
                        std::int64_t head) {
  return batch * s.batch + row * s.seq + head * s.heads;
}

// out[d] = t's element at base + d · stride for d < count; a unit stride (the
// usual case) gets a loop of its own that the compiler vectorizes.
template <DType kType>
void load_run(const void* data, std::int64_t base, std::int64_t stride, std::int64_t count,
              float* out) {
  if (stride == 1) {
    for (std::int64_t d = 0; d < count; ++d) out[d] = load_element<kType>(data, base + d);
  } else {
    for (std::int64_t d = 0; d < count; ++d) out[d] = load_element<kType>(data, base + d * stride);
  }
}

}  // namespace

void load_rows(const TensorView& t, std::int64_t batch, std::int64_t head, std::int64_t row0,
               std::int64_t rows, std::int64_t padded_rows, float* tile, std::int64_t ld) {
  const Strides4 s = strides_of(t);
  const std::int64_t dim = t.dim();
  dispatch_dtype(t.dtype, [&]<DType kType>() {
    for (std::int64_t r = 0; r < rows; ++r) {
      float* out = tile + r * ld;
      load_run<kType>(t.data, row_offset(s, batch, row0 + r, head), s.dim, dim, out);
      std::fill(out + dim, out + ld, 0.0f);
    }
  });
  std::fill(tile + rows * ld, tile + padded_rows * ld, 0.0f);
}

void load_rows_transposed(const TensorView& t, std::int64_t batch, std::int64_t head,
                          std::int64_t row0, std::int64_t rows, float* tile, std::int64_t ld) {
  const Strides4 s = strides_of(t);
  const std::int64_t dim = t.dim();
  // Blocks of 16 rows x 16 columns: each row read in order into `block`,
  // then one 16 x 16 transpose into the tile (`flipped` when the block
  // reaches past the last column, whose rows the tile does not have).
  constexpr std::int64_t kBlock = 16;
  alignas(64) float block[kBlock * kBlock];
  alignas(64) float flipped[kBlock * kBlock];
  dispatch_dtype(t.dtype, [&]<DType kType>() {
    std::int64_t r0 = 0;
    for (; r0 + kBlock <= rows; r0 += kBlock) {
      for (std::int64_t d0 = 0; d0 < dim; d0 += kBlock) {
        const std::int64_t width = std::min(kBlock, dim - d0);
        for (std::int64_t i = 0; i < kBlock; ++i) {
          float* out = block + i * kBlock;
          load_run<kType>(t.data, row_offset(s, batch, row0 + r0 + i, head) + d0 * s.dim, s.dim,
                          width, out);
          std::fill(out + width, out + kBlock, 0.0f);
        }
        float* destination = tile + d0 * ld + r0;
        if (width == kBlock) {
          transpose_16x16(block, kBlock, destination, static_cast<int>(ld));
        } else {
          transpose_16x16(block, kBlock, flipped, kBlock);
          for (std::int64_t d = 0; d < width; ++d) {
            std::copy(flipped + d * kBlock, flipped + (d + 1) * kBlock, destination + d * ld);
          }
        }
      }
    }
    for (std::int64_t r = r0; r < rows; ++r) {
      const std::int64_t base = row_offset(s, batch, row0 + r, head);
      for (std::int64_t d = 0; d < dim; ++d) {
        tile[d * ld + r] = load_element<kType>(t.data, base + d * s.dim);
      }
    }
  });
  for (std::int64_t d = 0; d < dim; ++d) std::fill(tile + d * ld + rows, tile + (d + 1) * ld, 0.0f);
}

void store_rows(const TensorView& t, std::int64_t batch, std::int64_t head, std::int64_t row0,
                std::int64_t rows, const float* tile, std::int64_t ld, float factor) {
  const Strides4 s = strides_of(t);
  const std::int64_t dim = t.dim();
  dispatch_dtype(t.dtype, [&]<DType kType>() {
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t base = row_offset(s, batch, row0 + r, head);
      const float* in = tile + r * ld;
      for (std::int64_t d = 0; d < dim; ++d) {
        store_element<kType>(t.data, base + d * s.dim, factor * in[d]);
      }
    }
  });
}

}  // namespace flashgen::cpu
