// Moving rows of one (batch, head) between a user tensor (any dtype, any
// strides) and a contiguous fp32 tile. Loads zero-fill every padding row and
// column, so padded tile entries contribute nothing to the GEMMs.
#pragma once

#include <cstdint>

#include "flashgen/flashgen.hpp"

namespace flashgen::cpu {

// tile[r, d] (row-major, leading dimension ld) = t[batch, row0 + r, head, d]
// for r < rows, d < dim; zero for r in [rows, padded_rows) and d in [dim, ld).
void load_rows(const TensorView& t, std::int64_t batch, std::int64_t head, std::int64_t row0,
               std::int64_t rows, std::int64_t padded_rows, float* tile, std::int64_t ld);

// tile[d, r] (leading dimension ld >= rows) = t[batch, row0 + r, head, d] for
// d < dim; zero for r in [rows, ld).
void load_rows_transposed(const TensorView& t, std::int64_t batch, std::int64_t head,
                          std::int64_t row0, std::int64_t rows, float* tile, std::int64_t ld);

// t[batch, row0 + r, head, d] = factor · tile[r, d] rounded to t's dtype, for
// r < rows and d < dim; nothing else of t is touched.
void store_rows(const TensorView& t, std::int64_t batch, std::int64_t head, std::int64_t row0,
                std::int64_t rows, const float* tile, std::int64_t ld, float factor);

}  // namespace flashgen::cpu
