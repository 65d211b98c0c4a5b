// The state the CPU flash backward's passes share (flash_backward.cpp for
// Dterm, the key/value pass and dQ's sums; flash_backward_query.cpp for the
// query pass).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <vector>

#include "common/problem.hpp"
#include "cpu/blocking.hpp"
#include "cpu/mask_program.hpp"
#include "cpu/score_mods.hpp"
#include "cpu/tensor_blocks.hpp"

namespace flashgen::cpu {

// Q and dO converted once per pass over (batch, kv head) pairs, for the
// key/value pass: Qᵀ and dOᵀ (B of Sᵀ and dPᵀ), Q and dO rows (B of dK and
// dV), fp32 or packed bf16.
struct QueryBlocks {
  TensorBlocks q_transposed, q, grad_o_transposed, grad_o;
  bool packed;
};

struct BackwardContext {
  const Problem& p;
  const BackwardArgs& args;
  Blocking blocking;
  std::int64_t dim_qk_padded, dim_v_padded;
  ScoreModifier mods;
  float scale_log2;
  std::vector<float> dterm;  // [batch, heads_q, seq_q] rowsum(dO ∘ O)
  // dQ's shares, when the key/value pass computes them, for (batch, kv head)
  // pairs [first_pair, first_pair + pairs):
  // [pair - first_pair, head in group, key block, query_blocks · query_rows, dim_qk_padded]
  float* dq_shares = nullptr;
  std::int64_t first_pair = 0;
  // Q and dO blocks of the query heads of those pairs, for the key/value pass.
  const QueryBlocks* query_blocks_converted = nullptr;
  // The user mask, when there is one: masked pairs get P = 0, so dS = 0.
  std::optional<MaskProgram> mask = std::nullopt;

  // A score row's modifiers, then the user mask, before its probabilities:
  // a query's row over the keys from `key` on or (along_queries) a key's row
  // over the queries from `query` on, `width` columns of which `visible` are
  // those the diagonals leave. A padding row (real false) is left alone.
  // Returns whether the modifiers ran: the row's dS then takes the soft
  // cap's slope (softcap_chain).
  bool modify_and_mask(float* scores, int width, std::int64_t batch, std::int64_t head,
                       std::int64_t query, std::int64_t key, bool along_queries,
                       const RowRange& visible, bool real, float* softcap_slope,
                       std::uint8_t* attend) const {
    const bool modify = mods.active() && real;
    if (modify && along_queries)
      mods.key_row(scores, width, batch, head, key, query, softcap_slope);
    else if (modify)
      mods.query_row(scores, width, batch, head, query, key, softcap_slope);
    if (mask && real) {
      // The mask's verdicts on the visible pairs, along the row; its q_idx is
      // the query row's position among the keys.
      const int n = static_cast<int>(visible.size());
      const std::int64_t first_query = along_queries ? query + visible.begin : query;
      const std::int64_t first_key = along_queries ? key : key + visible.begin;
      mask->evaluate(batch, head, p.diagonal_offset() + first_query, along_queries ? 1 : 0,
                     first_key, along_queries ? 0 : 1, n, attend);
      mask_scores(scores + visible.begin, attend, 0, n);
    }
    return modify;
  }

  // dS of a row whose scores the modifiers changed: times the soft cap's slope.
  void softcap_chain(float* grad_scores, int width, bool modified,
                     const float* softcap_slope) const {
    if (modified && mods.has_softcap()) ScoreModifier::chain(grad_scores, softcap_slope, width);
  }

  std::int64_t key_blocks() const { return ceil_div(p.seq_kv, blocking.key_rows); }
  std::int64_t query_blocks() const { return ceil_div(p.seq_q, blocking.query_rows); }
  std::int64_t share_floats() const { return query_blocks() * blocking.query_rows * dim_qk_padded; }
  float* dq_share(std::int64_t pair, std::int64_t head, std::int64_t key_block) const {
    const std::int64_t slot = pair - first_pair;
    const std::int64_t in_group = head % p.group_size();
    return dq_shares +
           ((slot * p.group_size() + in_group) * key_blocks() + key_block) * share_floats();
  }
  // The query blocks the key/value task of `key_block` visits: the others
  // see none of its keys.
  RowRange visited_query_blocks(std::int64_t key_block) const {
    const std::int64_t key0 = key_block * blocking.key_rows;
    return query_blocks_seeing(p, blocking, key0, std::min(blocking.key_rows, p.seq_kv - key0));
  }

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

// The query pass's share of one (batch, query head, block of query rows):
// dQ of those rows, over every key block they see.
void backward_query_block(BackwardContext& c, std::int64_t batch, std::int64_t head,
                          std::int64_t block);

}  // namespace flashgen::cpu
