#include "cpu/key_value_blocks.hpp"

#include <algorithm>

#include "cpu/thread_pool.hpp"
#include "cpu/tile_io.hpp"
#include "cpu/tile_math.hpp"

namespace flashgen::cpu {
namespace {

// At most this much memory for the converted blocks (one pair's blocks are
// always converted, whatever their size): 2 x 2048 keys x D = 128 in fp32
// is 2 MiB a pair, so 32 pairs at a time.
constexpr std::int64_t kBudgetBytes = std::int64_t{64} << 20;

}  // namespace

KeyValueBlocks::KeyValueBlocks(const Problem& p, const Blocking& blocking, bool packed_bf16)
    : p_(p),
      blocking_(blocking),
      packed_bf16_(packed_bf16),
      dim_v_padded_(round_up(p.dim_v, kTileColumnMultiple)),
      key_blocks_(ceil_div(p.seq_kv, blocking.key_rows)) {
  const int key_rows = static_cast<int>(blocking.key_rows);
  k_elements_ = packed_bf16 ? packed_bf16_b_elements(p.dim_qk, key_rows)
                            : p.dim_qk * blocking.key_rows;
  block_elements_ = k_elements_ + (packed_bf16 ? packed_bf16_b_elements(
                                                     key_rows, static_cast<int>(dim_v_padded_))
                                               : blocking.key_rows * dim_v_padded_);
  const std::int64_t element_bytes = packed_bf16 ? 2 : 4;
  const std::int64_t pair_bytes = key_blocks_ * block_elements_ * element_bytes;
  const std::int64_t pairs = p.batch * p.heads_kv;
  pairs_per_pass_ = std::clamp<std::int64_t>(kBudgetBytes / std::max<std::int64_t>(pair_bytes, 1),
                                             1, std::max<std::int64_t>(pairs, 1));
  const std::int64_t elements = pairs_per_pass_ * key_blocks_ * block_elements_;
  if (packed_bf16) {
    packed_.resize(elements);
  } else {
    storage_.resize(elements);
  }
}

void KeyValueBlocks::pack(const TensorView& k, const TensorView& v, std::int64_t first,
                          std::int64_t count, int threads) {
  parallel_for(count * key_blocks_, threads, [&](std::int64_t task) {
    const std::int64_t slot = task / key_blocks_, block = task % key_blocks_;
    const std::int64_t pair = first + slot;
    const std::int64_t batch = pair / p_.heads_kv, kv_head = pair % p_.heads_kv;
    const std::int64_t key0 = block * blocking_.key_rows;
    const std::int64_t keys = std::min(blocking_.key_rows, p_.seq_kv - key0);
    const std::int64_t key_rows = blocking_.key_rows;
    if (!packed_bf16_) {
      auto* k_tile = const_cast<float*>(k_transposed(slot, block));
      auto* v_tile = const_cast<float*>(this->v(slot, block));
      load_rows_transposed(k, batch, kv_head, key0, keys, k_tile, key_rows);
      load_rows(v, batch, kv_head, key0, keys, key_rows, v_tile, dim_v_padded_);
      return;
    }
    // Through fp32 tiles (exact for bf16 values) into the packed layout.
    std::vector<float> k_tile(p_.dim_qk * key_rows), v_tile(key_rows * dim_v_padded_);
    load_rows_transposed(k, batch, kv_head, key0, keys, k_tile.data(), key_rows);
    load_rows(v, batch, kv_head, key0, keys, key_rows, v_tile.data(), dim_v_padded_);
    pack_bf16_b(static_cast<int>(p_.dim_qk), static_cast<int>(key_rows), k_tile.data(),
                static_cast<int>(key_rows), const_cast<std::uint16_t*>(k_packed(slot, block)));
    pack_bf16_b(static_cast<int>(key_rows), static_cast<int>(dim_v_padded_), v_tile.data(),
                static_cast<int>(dim_v_padded_),
                const_cast<std::uint16_t*>(v_packed(slot, block)));
  });
}

}  // namespace flashgen::cpu
