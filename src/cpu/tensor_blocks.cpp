#include "cpu/tensor_blocks.hpp"

#include <algorithm>
#include <vector>

#include "cpu/blocking.hpp"
#include "cpu/thread_pool.hpp"
#include "cpu/tile_io.hpp"
#include "cpu/tile_math.hpp"

namespace flashgen::cpu {

TensorBlocks::Shape TensorBlocks::shape(const TensorView& t, std::int64_t block_rows,
                                        BlockForm form, std::int64_t ld, bool packed_bf16) {
  Shape s;
  s.tile_rows = form == BlockForm::rows ? block_rows : t.dim();
  s.tile_columns = form == BlockForm::rows ? ld : block_rows;
  s.block_elements = packed_bf16
                         ? packed_bf16_b_elements(s.tile_rows, static_cast<int>(s.tile_columns))
                         : s.tile_rows * s.tile_columns;
  return s;
}

std::int64_t TensorBlocks::head_bytes(const TensorView& t, std::int64_t block_rows, BlockForm form,
                                      std::int64_t ld, bool packed_bf16) {
  const std::int64_t element_bytes = packed_bf16 ? 2 : 4;
  return ceil_div(t.seq(), block_rows) *
         shape(t, block_rows, form, ld, packed_bf16).block_elements * element_bytes;
}

TensorBlocks::TensorBlocks(const TensorView& t, std::int64_t block_rows, BlockForm form,
                           std::int64_t ld, bool packed_bf16, std::int64_t heads_per_range)
    : t_(t),
      block_rows_(block_rows),
      form_(form),
      ld_(ld),
      packed_bf16_(packed_bf16),
      blocks_(ceil_div(t.seq(), block_rows)) {
  const Shape s = shape(t, block_rows, form, ld, packed_bf16);
  tile_rows_ = s.tile_rows, tile_columns_ = s.tile_columns, block_elements_ = s.block_elements;
  packed_pitch_ = packed_bf16_b_pitch(static_cast<int>(tile_columns_));
  const std::int64_t elements = heads_per_range * blocks_ * block_elements_;
  storage_ = pooled_buffer(static_cast<std::size_t>(elements) * (packed_bf16 ? 2 : 4));
}

void TensorBlocks::convert(std::int64_t first, std::int64_t count, int threads) {
  parallel_for(count * blocks_, threads, [&](std::int64_t task) {
    const std::int64_t slot = task / blocks_, block = task % blocks_;
    const std::int64_t batch = (first + slot) / t_.heads(), head = (first + slot) % t_.heads();
    const std::int64_t row0 = block * block_rows_;
    const std::int64_t rows = std::min(block_rows_, t_.seq() - row0);
    // bf16 blocks go through an fp32 tile (exact for bf16 values), one per
    // thread kept between blocks.
    thread_local std::vector<float> staging;
    staging.resize(packed_bf16_ ? tile_rows_ * tile_columns_ : 0);
    float* const fp32_block =
        static_cast<float*>(storage_.get()) + (slot * blocks_ + block) * block_elements_;
    float* tile_data = packed_bf16_ ? staging.data() : fp32_block;
    if (form_ == BlockForm::rows) {
      load_rows(t_, batch, head, row0, rows, block_rows_, tile_data, ld_);
    } else {
      load_rows_transposed(t_, batch, head, row0, rows, tile_data, block_rows_);
    }
    if (packed_bf16_) {
      pack_bf16_b(static_cast<int>(tile_rows_), static_cast<int>(tile_columns_), tile_data,
                  static_cast<int>(tile_columns_),
                  static_cast<std::uint16_t*>(storage_.get()) +
                      (slot * blocks_ + block) * block_elements_);
    }
  });
}

}  // namespace flashgen::cpu
