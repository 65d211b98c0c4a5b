#include "cpu/tile_io.hpp"

#include <algorithm>

#include "common/dtype.hpp"
#include "common/problem.hpp"

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
  }
}

std::int64_t row_offset(const Strides4& s, std::int64_t batch, std::int64_t row,
                        std::int64_t head) {
  return batch * s.batch + row * s.seq + head * s.heads;
}

}  // namespace

void load_rows(const TensorView& t, std::int64_t batch, std::int64_t head, std::int64_t row0,
               std::int64_t rows, std::int64_t padded_rows, float* tile, std::int64_t ld) {
  const Strides4 s = strides_of(t);
  const std::int64_t dim = t.dim();
  dispatch_dtype(t.dtype, [&]<DType kType>() {
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t base = row_offset(s, batch, row0 + r, head);
      float* out = tile + r * ld;
      for (std::int64_t d = 0; d < dim; ++d) out[d] = load_element<kType>(t.data, base + d * s.dim);
      std::fill(out + dim, out + ld, 0.0f);
    }
  });
  std::fill(tile + rows * ld, tile + padded_rows * ld, 0.0f);
}

void load_rows_transposed(const TensorView& t, std::int64_t batch, std::int64_t head,
                          std::int64_t row0, std::int64_t rows, float* tile, std::int64_t ld) {
  const Strides4 s = strides_of(t);
  const std::int64_t dim = t.dim();
  // Eight rows at a time: for each d the eight values land side by side in
  // the tile (one 32-byte run) while each source row is read in order.
  constexpr std::int64_t kRowGroup = 8;
  dispatch_dtype(t.dtype, [&]<DType kType>() {
    std::int64_t r0 = 0;
    for (; r0 + kRowGroup <= rows; r0 += kRowGroup) {
      std::int64_t base[kRowGroup];
      for (std::int64_t i = 0; i < kRowGroup; ++i) {
        base[i] = row_offset(s, batch, row0 + r0 + i, head);
      }
      for (std::int64_t d = 0; d < dim; ++d) {
        float* out = tile + d * ld + r0;
        for (std::int64_t i = 0; i < kRowGroup; ++i) {
          out[i] = load_element<kType>(t.data, base[i] + d * s.dim);
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
