// K and V of a range of (batch, kv head) pairs converted once into the fp32
// tiles the forward's GEMMs read, so that the query-block tasks of a head
// share them instead of each converting (and transposing) them again:
//   Kᵀ block  [dim_qk, key_rows]        (S = Q·Kᵀ reads it as B)
//   V  block  [key_rows, dim_v_padded]  (O += P·V reads it as B)
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
  KeyValueBlocks(const Problem& p, const Blocking& blocking);

  // (batch, kv head) pairs whose blocks fit the memory budget at once: the
  // forward packs and runs that many at a time. Depends only on the problem.
  std::int64_t pairs_per_pass() const { return pairs_per_pass_; }

  // Converts the blocks of pairs [first, first + count) (pair = batch ·
  // heads_kv + kv head), `threads` threads.
  void pack(const TensorView& k, const TensorView& v, std::int64_t first, std::int64_t count,
            int threads);

  // Tiles of key block `block` of the pair at `slot` = pair - first.
  const float* k_transposed(std::int64_t slot, std::int64_t block) const {
    return storage_.data() + (slot * key_blocks_ + block) * block_floats_;
  }
  const float* v(std::int64_t slot, std::int64_t block) const {
    return k_transposed(slot, block) + k_floats_;
  }
  std::int64_t dim_v_padded() const { return dim_v_padded_; }

 private:
  const Problem& p_;
  Blocking blocking_;
  std::int64_t dim_v_padded_, key_blocks_, k_floats_, block_floats_, pairs_per_pass_;
  std::vector<float> storage_;
};

}  // namespace flashgen::cpu
