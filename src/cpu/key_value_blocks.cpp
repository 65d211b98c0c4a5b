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

KeyValueBlocks::KeyValueBlocks(const Problem& p, const Blocking& blocking)
    : p_(p),
      blocking_(blocking),
      dim_v_padded_(round_up(p.dim_v, kTileColumnMultiple)),
      key_blocks_(ceil_div(p.seq_kv, blocking.key_rows)),
      k_floats_(p.dim_qk * blocking.key_rows),
      block_floats_(k_floats_ + blocking.key_rows * dim_v_padded_) {
  const std::int64_t pair_bytes = key_blocks_ * block_floats_ * std::int64_t{sizeof(float)};
  const std::int64_t pairs = p.batch * p.heads_kv;
  pairs_per_pass_ = std::clamp<std::int64_t>(kBudgetBytes / std::max<std::int64_t>(pair_bytes, 1),
                                             1, std::max<std::int64_t>(pairs, 1));
  storage_.resize(pairs_per_pass_ * key_blocks_ * block_floats_);
}

void KeyValueBlocks::pack(const TensorView& k, const TensorView& v, std::int64_t first,
                          std::int64_t count, int threads) {
  parallel_for(count * key_blocks_, threads, [&](std::int64_t task) {
    const std::int64_t slot = task / key_blocks_, block = task % key_blocks_;
    const std::int64_t pair = first + slot;
    const std::int64_t batch = pair / p_.heads_kv, kv_head = pair % p_.heads_kv;
    const std::int64_t key0 = block * blocking_.key_rows;
    const std::int64_t keys = std::min(blocking_.key_rows, p_.seq_kv - key0);
    auto* k_tile = const_cast<float*>(k_transposed(slot, block));
    auto* v_tile = const_cast<float*>(this->v(slot, block));
    load_rows_transposed(k, batch, kv_head, key0, keys, k_tile, blocking_.key_rows);
    load_rows(v, batch, kv_head, key0, keys, blocking_.key_rows, v_tile, dim_v_padded_);
  });
}

}  // namespace flashgen::cpu
