// K and V of a range of (batch, kv head) pairs converted once into the tiles
// the forward's GEMMs read, so that the query-block tasks of a head share
// them instead of each converting (and transposing) them again:
//   fp32:        Kᵀ block [dim_qk, key_rows], V block [key_rows, dim_v_padded]
//   packed bf16: the same blocks packed as GEMM B operands (pack_bf16_b), for
//                bf16 inputs where the CPU has packed bf16 GEMMs
// Rows past the sequence and padding columns are zero.
#pragma once

#include <cstdint>
#include <vector>

#include "common/problem.hpp"
#include "cpu/blocking.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cpu {

class KeyValueBlocks {
 public:
  KeyValueBlocks(const Problem& p, const Blocking& blocking, bool packed_bf16);

  bool packed_bf16() const { return packed_bf16_; }
  // (batch, kv head) pairs whose blocks fit the memory budget at once: the
  // forward packs and runs that many at a time. Depends only on the problem.
  std::int64_t pairs_per_pass() const { return pairs_per_pass_; }

  // Converts the blocks of pairs [first, first + count) (pair = batch ·
  // heads_kv + kv head), `threads` threads.
  void pack(const TensorView& k, const TensorView& v, std::int64_t first, std::int64_t count,
            int threads);

  // Tiles of key block `block` of the pair at `slot` = pair - first.
  const float* k_transposed(std::int64_t slot, std::int64_t block) const {
    return storage_.data() + (slot * key_blocks_ + block) * block_elements_;
  }
  const float* v(std::int64_t slot, std::int64_t block) const {
    return k_transposed(slot, block) + k_elements_;
  }
  const std::uint16_t* k_packed(std::int64_t slot, std::int64_t block) const {
    return packed_.data() + (slot * key_blocks_ + block) * block_elements_;
  }
  const std::uint16_t* v_packed(std::int64_t slot, std::int64_t block) const {
    return k_packed(slot, block) + k_elements_;
  }
  std::int64_t dim_v_padded() const { return dim_v_padded_; }

 private:
  const Problem& p_;
  Blocking blocking_;
  bool packed_bf16_;
  std::int64_t dim_v_padded_, key_blocks_, k_elements_, block_elements_, pairs_per_pass_;
  std::vector<float> storage_;          // fp32 blocks
  std::vector<std::uint16_t> packed_;   // packed bf16 blocks
};

}  // namespace flashgen::cpu
