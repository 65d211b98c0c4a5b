// CPU flash backward in two passes, without atomics, recomputing P from the
// forward's LSE instead of storing it.
//
// Query pass, one task per (batch, query head, block of query rows):
//   Dterm = rowsum(dO ∘ O)             -> fp32 scratch [batch, heads_q, seq_q]
//   for each key block: S = Q·Kᵀ, P = exp2(S·c - L2), dP = dO·Vᵀ,
//                       dS = P ∘ (dP - Dterm), dQ += dS·K
//   dQ *= scale
// Key/value pass, one task per (batch, kv head, block of key rows), after the
// query pass (it reads Dterm):
//   for each query head of the kv head's group, for each query block:
//       Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ·c - L2), dPᵀ = V·dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ - Dterm),
//       dV += Pᵀ·dO, dK += dSᵀ·Q
//   dK *= scale
// c = scale·log2(e), L2 = LSE·log2(e). Every output row is owned by one task
// and summed in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "common/problem.hpp"
#include "cpu/blocking.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/thread_pool.hpp"
#include "cpu/tile_io.hpp"
#include "cpu/tile_math.hpp"

namespace flashgen::cpu {
namespace {

struct BackwardContext {
  const Problem& p;
  const BackwardArgs& args;
  Blocking blocking;
  std::int64_t dim_qk_padded, dim_v_padded;
  float scale_log2;
  std::vector<float> dterm;  // [batch, heads_q, seq_q] rowsum(dO ∘ O)

  std::int64_t dterm_index(std::int64_t batch, std::int64_t head, std::int64_t row) const {
    return (batch * p.heads_q + head) * p.seq_q + row;
  }

  // Base-2 log-sum-exp of a query row. A row that sees no key has LSE = -inf;
  // every score of it is masked, so any finite stand-in gives P = 0.
  float lse_log2(std::int64_t batch, std::int64_t head, std::int64_t row) const {
    const Strides3 s = strides_of(args.lse);
    const float lse = args.lse.data[batch * s.batch + head * s.heads + row * s.seq];
    return std::isfinite(lse) ? lse * std::numbers::log2e_v<float> : 0.0f;
  }
};

// ---- Query pass ----

struct QueryTiles {
  QueryTiles(const BackwardContext& c)
      : q(c.blocking.query_rows * c.p.dim_qk),
        grad_o(c.blocking.query_rows * c.dim_v_padded),
        o_row(c.dim_v_padded),
        k_transposed(c.p.dim_qk * c.blocking.key_rows),
        k(c.blocking.key_rows * c.dim_qk_padded),
        v_transposed(c.p.dim_v * c.blocking.key_rows),
        p(c.blocking.query_rows * c.blocking.key_rows),
        dp(c.blocking.query_rows * c.blocking.key_rows),
        grad_q(c.blocking.query_rows * c.dim_qk_padded, 0.0f),
        lse_log2(c.blocking.query_rows),
        dterm(c.blocking.query_rows) {}

  std::vector<float> q;             // [query_rows, dim_qk]
  std::vector<float> grad_o;        // [query_rows, dim_v_padded]
  std::vector<float> o_row;         // [dim_v_padded]
  std::vector<float> k_transposed;  // [dim_qk, key_rows]
  std::vector<float> k;             // [key_rows, dim_qk_padded]
  std::vector<float> v_transposed;  // [dim_v, key_rows]
  std::vector<float> p;             // [query_rows, key_rows]: S, then P
  std::vector<float> dp;            // [query_rows, key_rows]: dP, then dS
  std::vector<float> grad_q;        // [query_rows, dim_qk_padded]
  std::vector<float> lse_log2;      // [query_rows]
  std::vector<float> dterm;         // [query_rows]
};

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
    if (r < rows) {
      load_rows(a.o, batch, head, row0 + r, 1, 1, t.o_row.data(), c.dim_v_padded);
      t.dterm[r] = dot(t.grad_o.data() + r * c.dim_v_padded, t.o_row.data(),
                       static_cast<int>(c.dim_v_padded));
      c.dterm[c.dterm_index(batch, head, row0 + r)] = t.dterm[r];
      t.lse_log2[r] = c.lse_log2(batch, head, row0 + r);
    } else {
      t.dterm[r] = 0.0f;
      t.lse_log2[r] = 0.0f;
    }
  }

  const std::int64_t key_end = visible_keys(p, row0 + rows - 1);
  for (std::int64_t key0 = 0; key0 < key_end; key0 += c.blocking.key_rows) {
    const std::int64_t keys = std::min(c.blocking.key_rows, p.seq_kv - key0);
    const std::int64_t keys_padded = round_up(keys, kTileColumnMultiple);
    load_rows_transposed(a.k, batch, kv_head, key0, keys, t.k_transposed.data(), key_ld);
    load_rows(a.k, batch, kv_head, key0, keys, keys_padded, t.k.data(), c.dim_qk_padded);
    load_rows_transposed(a.v, batch, kv_head, key0, keys, t.v_transposed.data(), key_ld);

    // S = Q·Kᵀ, then P  [rows_padded, keys_padded]
    gemm(rows_padded, keys_padded, p.dim_qk, t.q.data(), p.dim_qk, t.k_transposed.data(),
            key_ld, t.p.data(), key_ld, false);
    // dP = dO·Vᵀ  [rows_padded, keys_padded]
    gemm(rows_padded, keys_padded, p.dim_v, t.grad_o.data(), c.dim_v_padded,
            t.v_transposed.data(), key_ld, t.dp.data(), key_ld, false);
    for (std::int64_t r = 0; r < rows_padded; ++r) {
      const std::int64_t visible = r < rows ? visible_keys(p, row0 + r) - key0 : 0;
      const int visible_end = static_cast<int>(std::clamp<std::int64_t>(visible, 0, keys));
      float* p_row = t.p.data() + r * key_ld;
      probabilities_row(p_row, keys_padded, 0, visible_end, c.scale_log2, t.lse_log2[r]);
      // dS = P ∘ (dP - Dterm), in place of dP
      score_gradient_row(p_row, t.dp.data() + r * key_ld, keys_padded, t.dterm[r]);
    }
    // dQ += dS·K  [rows_padded, dim_qk_padded]
    gemm(rows_padded, c.dim_qk_padded, keys_padded, t.dp.data(), key_ld, t.k.data(),
            c.dim_qk_padded, t.grad_q.data(), c.dim_qk_padded, true);
  }
  store_rows(a.grad_q, batch, head, row0, rows, t.grad_q.data(), c.dim_qk_padded,
             static_cast<float>(p.scale));
}

// ---- Key/value pass ----

struct KeyValueTiles {
  KeyValueTiles(const BackwardContext& c)
      : k(c.blocking.key_rows * c.p.dim_qk),
        v(c.blocking.key_rows * c.p.dim_v),
        q_transposed(c.p.dim_qk * c.blocking.query_rows),
        q(c.blocking.query_rows * c.dim_qk_padded),
        grad_o_transposed(c.p.dim_v * c.blocking.query_rows),
        grad_o(c.blocking.query_rows * c.dim_v_padded),
        p(c.blocking.key_rows * c.blocking.query_rows),
        dp(c.blocking.key_rows * c.blocking.query_rows),
        grad_k(c.blocking.key_rows * c.dim_qk_padded, 0.0f),
        grad_v(c.blocking.key_rows * c.dim_v_padded, 0.0f),
        lse_log2(c.blocking.query_rows),
        dterm(c.blocking.query_rows) {}

  std::vector<float> k;                  // [key_rows, dim_qk]
  std::vector<float> v;                  // [key_rows, dim_v]
  std::vector<float> q_transposed;       // [dim_qk, query_rows]
  std::vector<float> q;                  // [query_rows, dim_qk_padded]
  std::vector<float> grad_o_transposed;  // [dim_v, query_rows]
  std::vector<float> grad_o;             // [query_rows, dim_v_padded]
  std::vector<float> p;                  // [key_rows, query_rows]: Sᵀ, then Pᵀ
  std::vector<float> dp;                 // [key_rows, query_rows]: dPᵀ, then dSᵀ
  std::vector<float> grad_k;             // [key_rows, dim_qk_padded]
  std::vector<float> grad_v;             // [key_rows, dim_v_padded]
  std::vector<float> lse_log2;           // [query_rows] per column
  std::vector<float> dterm;              // [query_rows] per column
};

void backward_key_value_block(BackwardContext& c, std::int64_t batch, std::int64_t kv_head,
                              std::int64_t block) {
  const Problem& p = c.p;
  const BackwardArgs& a = c.args;
  KeyValueTiles t(c);
  const std::int64_t key0 = block * c.blocking.key_rows;
  const std::int64_t keys = std::min(c.blocking.key_rows, p.seq_kv - key0);
  const std::int64_t keys_padded = round_up(keys, kTileRowMultiple);
  const std::int64_t query_ld = c.blocking.query_rows;
  const GemmFunction gemm = gemm_for(p.dtype);

  load_rows(a.k, batch, kv_head, key0, keys, keys_padded, t.k.data(), p.dim_qk);
  load_rows(a.v, batch, kv_head, key0, keys, keys_padded, t.v.data(), p.dim_v);

  // Queries before the one that sees the block's first key see none of it;
  // start at the query block holding it.
  const std::int64_t query_begin =
      first_query(p, key0) / c.blocking.query_rows * c.blocking.query_rows;
  const std::int64_t group = p.group_size();
  for (std::int64_t head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    for (std::int64_t q0 = query_begin; q0 < p.seq_q; q0 += c.blocking.query_rows) {
      const std::int64_t queries = std::min(c.blocking.query_rows, p.seq_q - q0);
      const std::int64_t queries_padded = round_up(queries, kTileColumnMultiple);
      load_rows_transposed(a.q, batch, head, q0, queries, t.q_transposed.data(), query_ld);
      load_rows(a.q, batch, head, q0, queries, queries_padded, t.q.data(), c.dim_qk_padded);
      load_rows_transposed(a.grad_o, batch, head, q0, queries, t.grad_o_transposed.data(),
                           query_ld);
      load_rows(a.grad_o, batch, head, q0, queries, queries_padded, t.grad_o.data(),
                c.dim_v_padded);
      for (std::int64_t col = 0; col < queries_padded; ++col) {
        const bool real = col < queries;
        t.lse_log2[col] = real ? c.lse_log2(batch, head, q0 + col) : 0.0f;
        t.dterm[col] = real ? c.dterm[c.dterm_index(batch, head, q0 + col)] : 0.0f;
      }

      // Sᵀ = K·Qᵀ  [keys_padded, queries_padded]
      gemm(keys_padded, queries_padded, p.dim_qk, t.k.data(), p.dim_qk,
              t.q_transposed.data(), query_ld, t.p.data(), query_ld, false);
      // dPᵀ = V·dOᵀ  [keys_padded, queries_padded]
      gemm(keys_padded, queries_padded, p.dim_v, t.v.data(), p.dim_v,
              t.grad_o_transposed.data(), query_ld, t.dp.data(), query_ld, false);
      for (std::int64_t r = 0; r < keys_padded; ++r) {
        // Key row r is seen by the queries in [first_query, seq_q).
        const std::int64_t begin = first_query(p, key0 + r) - q0;
        const int visible_begin = static_cast<int>(std::clamp<std::int64_t>(begin, 0, queries));
        const int visible_end = r < keys ? static_cast<int>(queries) : 0;
        float* p_row = t.p.data() + r * query_ld;
        probabilities_row_by_column(p_row, queries_padded, visible_begin, visible_end,
                                    c.scale_log2, t.lse_log2.data());
        // dSᵀ = Pᵀ ∘ (dPᵀ - Dterm), in place of dPᵀ
        score_gradient_row_by_column(p_row, t.dp.data() + r * query_ld, queries_padded,
                                     t.dterm.data());
      }
      // dV += Pᵀ·dO  [keys_padded, dim_v_padded]
      gemm(keys_padded, c.dim_v_padded, queries_padded, t.p.data(), query_ld,
              t.grad_o.data(), c.dim_v_padded, t.grad_v.data(), c.dim_v_padded, true);
      // dK += dSᵀ·Q  [keys_padded, dim_qk_padded]
      gemm(keys_padded, c.dim_qk_padded, queries_padded, t.dp.data(), query_ld, t.q.data(),
              c.dim_qk_padded, t.grad_k.data(), c.dim_qk_padded, true);
    }
  }
  store_rows(a.grad_k, batch, kv_head, key0, keys, t.grad_k.data(), c.dim_qk_padded,
             static_cast<float>(p.scale));
  store_rows(a.grad_v, batch, kv_head, key0, keys, t.grad_v.data(), c.dim_v_padded, 1.0f);
}

}  // namespace

void backward(const Problem& p, const BackwardArgs& args, int threads) {
  BackwardContext c{p,
                    args,
                    choose_blocking(p),
                    round_up(p.dim_qk, kTileColumnMultiple),
                    round_up(p.dim_v, kTileColumnMultiple),
                    static_cast<float>(p.scale * std::numbers::log2e),
                    std::vector<float>(p.batch * p.heads_q * p.seq_q)};

  const std::int64_t query_blocks = ceil_div(p.seq_q, c.blocking.query_rows);
  parallel_for(p.batch * p.heads_q * query_blocks, threads, [&](std::int64_t task) {
    // Causal: later query blocks see more keys; hand them out first.
    const std::int64_t block = query_blocks - 1 - task % query_blocks;
    const std::int64_t batch_head = task / query_blocks;
    backward_query_block(c, batch_head / p.heads_q, batch_head % p.heads_q, block);
  });

  const std::int64_t key_blocks = ceil_div(p.seq_kv, c.blocking.key_rows);
  parallel_for(p.batch * p.heads_kv * key_blocks, threads, [&](std::int64_t task) {
    // Causal: earlier key blocks are seen by more queries; hand them out first.
    const std::int64_t block = task % key_blocks;
    const std::int64_t batch_head = task / key_blocks;
    backward_key_value_block(c, batch_head / p.heads_kv, batch_head % p.heads_kv, block);
  });
}

}  // namespace flashgen::cpu
