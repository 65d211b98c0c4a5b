// One input tensor's blocks of rows, converted once into the tiles the GEMMs
// read, so that every task that reads a block shares one conversion (and
// transpose) instead of making its own. Per (batch · heads + head, block):
//   BlockForm::rows        [block_rows, ld]   t[batch, row0 + r, head, d] at (r, d)
//   BlockForm::transposed  [dim, block_rows]  the same at (d, r)
// in fp32, or, with packed_bf16, that tile packed by pack_bf16_b as a GEMM's
// B operand (k = the tile's rows, n = its columns). Rows past the sequence
// and padding columns are zero. Heads are converted a range at a time: the
// caller keeps the memory of a range within its budget.
#pragma once

#include <cstdint>
#include <memory>

#include "cpu/buffer_pool.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cpu {

enum class BlockForm { rows, transposed };

class TensorBlocks {
 public:
  // Room for `heads_per_range` heads of `t`; ld >= dim for BlockForm::rows.
  TensorBlocks(const TensorView& t, std::int64_t block_rows, BlockForm form, std::int64_t ld,
               bool packed_bf16, std::int64_t heads_per_range);

  // Bytes of one head's blocks.
  static std::int64_t head_bytes(const TensorView& t, std::int64_t block_rows, BlockForm form,
                                 std::int64_t ld, bool packed_bf16);

  // Converts the blocks of heads [first, first + count) (head index = batch ·
  // heads + head), on `threads` threads.
  void convert(std::int64_t first, std::int64_t count, int threads);

  // Block `block` of the head at `slot` = head index - first.
  const float* tile(std::int64_t slot, std::int64_t block) const {
    return static_cast<const float*>(storage_.get()) + (slot * blocks_ + block) * block_elements_;
  }
  const std::uint16_t* packed(std::int64_t slot, std::int64_t block) const {
    return static_cast<const std::uint16_t*>(storage_.get()) +
           (slot * blocks_ + block) * block_elements_;
  }
  // The packed tiles' B pitch (gemm_bf16_packed's b_pitch).
  int packed_pitch() const { return packed_pitch_; }

 private:
  struct Shape {
    std::int64_t tile_rows, tile_columns, block_elements;
  };
  static Shape shape(const TensorView& t, std::int64_t block_rows, BlockForm form, std::int64_t ld,
                     bool packed_bf16);

  const TensorView& t_;
  std::int64_t block_rows_;
  BlockForm form_;
  std::int64_t ld_;
  bool packed_bf16_;
  std::int64_t blocks_, tile_rows_, tile_columns_, block_elements_;
  int packed_pitch_;
  // fp32 or packed bf16 elements, uninitialized: convert() writes every
  // element of a block it converts.
  PooledBuffer storage_;
};

}  // namespace flashgen::cpu
