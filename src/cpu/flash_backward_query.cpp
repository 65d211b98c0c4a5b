// The CPU flash backward's query pass (flash_backward.cpp says when it runs):
// for each key block a query block sees,
//   S = Q·Kᵀ, P = exp2(S·c - L2), dP = dO·Vᵀ, dS = P ∘ (dP - Dterm), dQ += dS·K
// with the soft cap's and ALiBi's rewrite of S (score_mods.hpp) and the soft
// cap's derivative on dS.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/backward_context.hpp"
#include "cpu/tile_io.hpp"
#include "cpu/tile_math.hpp"

namespace flashgen::cpu {
namespace {

struct QueryTiles {
  QueryTiles(const BackwardContext& c)
      : q(c.blocking.query_rows * c.p.dim_qk),
        grad_o(c.blocking.query_rows * c.dim_v_padded),
        k_transposed(c.p.dim_qk * c.blocking.key_rows),
        k(c.blocking.key_rows * c.dim_qk_padded),
        v_transposed(c.p.dim_v * c.blocking.key_rows),
        p(c.blocking.query_rows * c.blocking.key_rows),
        dp(c.blocking.query_rows * c.blocking.key_rows),
        grad_q(c.blocking.query_rows * c.dim_qk_padded, 0.0f),
        lse_log2(c.blocking.query_rows),
        dterm(c.blocking.query_rows),
        softcap_slope(c.blocking.key_rows),
        attend(c.mask ? c.blocking.key_rows : 0) {}

  std::vector<float> q;             // [query_rows, dim_qk]
  std::vector<float> grad_o;        // [query_rows, dim_v_padded]
  std::vector<float> k_transposed;  // [dim_qk, key_rows]
  std::vector<float> k;             // [key_rows, dim_qk_padded]
  std::vector<float> v_transposed;  // [dim_v, key_rows]
  std::vector<float> p;             // [query_rows, key_rows]: S, then P
  std::vector<float> dp;            // [query_rows, key_rows]: dP, then dS
  std::vector<float> grad_q;        // [query_rows, dim_qk_padded]
  std::vector<float> lse_log2;      // [query_rows]
  std::vector<float> dterm;         // [query_rows]
  std::vector<float> softcap_slope; // [key_rows] 1 - tanh² of one row
  std::vector<std::uint8_t> attend; // [key_rows] the user mask of one row
};

}  // namespace

void backward_query_block(BackwardContext& c, std::int64_t batch, std::int64_t head,
                          std::int64_t block) {
  const Problem& p = c.p;
  const BackwardArgs& a = c.args;
  QueryTiles t(c);
  const std::int64_t kv_head = head / p.group_size();
  const std::int64_t row0 = block * c.blocking.query_rows;
  const std::int64_t rows = std::min(c.blocking.query_rows, p.seq_q - row0);
  const std::int64_t rows_padded = round_up(rows, kTileRowMultiple);
  const std::int64_t key_ld = c.blocking.key_rows;
  const GemmFunction gemm = gemm_for(p.dtype);

  load_rows(a.q, batch, head, row0, rows, rows_padded, t.q.data(), p.dim_qk);
  load_rows(a.grad_o, batch, head, row0, rows, rows_padded, t.grad_o.data(), c.dim_v_padded);
  for (std::int64_t r = 0; r < rows_padded; ++r) {
    const bool real = r < rows;
    t.dterm[r] = real ? c.dterm[c.dterm_index(batch, head, row0 + r)] : 0.0f;
    t.lse_log2[r] = real ? c.lse_log2(batch, head, row0 + r) : 0.0f;
  }

  const RowRange key_blocks = key_blocks_seen(p, c.blocking, row0, rows);
  for (std::int64_t key_block = key_blocks.begin; key_block < key_blocks.end; ++key_block) {
    const std::int64_t key0 = key_block * c.blocking.key_rows;
    const std::int64_t keys = std::min(c.blocking.key_rows, p.seq_kv - key0);
    const std::int64_t keys_padded = round_up(keys, kTileColumnMultiple);
    load_rows_transposed(a.k, batch, kv_head, key0, keys, t.k_transposed.data(), key_ld);
    load_rows(a.k, batch, kv_head, key0, keys, keys_padded, t.k.data(), c.dim_qk_padded);
    load_rows_transposed(a.v, batch, kv_head, key0, keys, t.v_transposed.data(), key_ld);

    // S = Q·Kᵀ, then P  [rows_padded, keys_padded]
    gemm(rows_padded, keys_padded, p.dim_qk, t.q.data(), p.dim_qk, t.k_transposed.data(), key_ld,
         t.p.data(), key_ld, false);
    // dP = dO·Vᵀ  [rows_padded, keys_padded]
    gemm(rows_padded, keys_padded, p.dim_v, t.grad_o.data(), c.dim_v_padded, t.v_transposed.data(),
         key_ld, t.dp.data(), key_ld, false);
    for (std::int64_t r = 0; r < rows_padded; ++r) {
      const RowRange visible =
          r < rows ? columns_within(visible_keys(p, row0 + r), key0, keys) : RowRange{};
      float* p_row = t.p.data() + r * key_ld;
      const bool modified =
          c.modify_and_mask(p_row, static_cast<int>(keys_padded), batch, head, row0 + r, key0,
                            false, visible, r < rows, t.softcap_slope.data(), t.attend.data());
      probabilities_row(p_row, keys_padded, static_cast<int>(visible.begin),
                        static_cast<int>(visible.end), c.scale_log2, t.lse_log2[r]);
      // dS = P ∘ (dP - Dterm), in place of dP
      float* ds_row = t.dp.data() + r * key_ld;
      score_gradient_row(p_row, ds_row, keys_padded, t.dterm[r]);
      c.softcap_chain(ds_row, static_cast<int>(keys_padded), modified, t.softcap_slope.data());
    }
    // dQ += dS·K  [rows_padded, dim_qk_padded]
    gemm(rows_padded, c.dim_qk_padded, keys_padded, t.dp.data(), key_ld, t.k.data(),
         c.dim_qk_padded, t.grad_q.data(), c.dim_qk_padded, true);
  }
  store_rows(a.grad_q, batch, head, row0, rows, t.grad_q.data(), c.dim_qk_padded,
             static_cast<float>(p.scale));
}

}  // namespace flashgen::cpu
