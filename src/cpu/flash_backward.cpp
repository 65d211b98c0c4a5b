// CPU flash backward without atomics, recomputing P from the forward's LSE
// instead of storing it. First, per (batch, query head, block of query rows):
//   Dterm = rowsum(dO ∘ O)             -> fp32 scratch [batch, heads_q, seq_q]
// Then the key/value pass, one task per (batch, kv head, block of key rows):
//   for each query head of the kv head's group, for each query block:
//       Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ·c - L2), dPᵀ = V·dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ - Dterm),
//       dV += Pᵀ·dO, dK += dSᵀ·Q, and dQ's share dQ_kb = dS·K
//   dK *= scale
// and dQ = scale · Σ_kb dQ_kb summed over key blocks in order, per query
// block: five GEMMs per tile pair. The shares take key_blocks x the size of
// dQ, so (batch, kv head) pairs go a memory budget's worth at a time; where
// one pair alone is over it, the query pass (flash_backward_query.cpp) computes dQ instead:
//   for each key block: S = Q·Kᵀ, P = exp2(S·c - L2), dP = dO·Vᵀ,
//                       dS = P ∘ (dP - Dterm), dQ += dS·K
// (seven GEMMs: S and dP twice). c = scale·log2(e), L2 = LSE·log2(e). Every
// output row is owned by one task and summed in a fixed order, so results do
// not depend on the thread count. FLASHGEN_CPU_BACKWARD=query_pass forces the
// query pass (tests run both ways). Soft cap and ALiBi rewrite the score rows
// as in the forward (score_mods.hpp) and the soft cap's derivative scales dS;
// a sink needs nothing here (the LSE includes it) but its own gradient
// (sink_gradient.hpp). Tiles outside the causal and window masks are skipped.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <numbers>
#include <string_view>
#include <vector>

#include "common/problem.hpp"
#include "cpu/backward_context.hpp"
#include "cpu/blocking.hpp"
#include "cpu/buffer_pool.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/score_mods.hpp"
#include "cpu/sink_gradient.hpp"
#include "cpu/tensor_blocks.hpp"
#include "cpu/thread_pool.hpp"
#include "cpu/tile_io.hpp"
#include "cpu/tile_math.hpp"

namespace flashgen::cpu {
namespace {

// ---- Dterm ----

void dterm_block(BackwardContext& c, std::int64_t batch, std::int64_t head, std::int64_t block) {
  const std::int64_t row0 = block * c.blocking.query_rows;
  const std::int64_t rows = std::min(c.blocking.query_rows, c.p.seq_q - row0);
  std::vector<float> grad_o(c.dim_v_padded), o(c.dim_v_padded);  // one row each
  for (std::int64_t r = 0; r < rows; ++r) {
    load_rows(c.args.grad_o, batch, head, row0 + r, 1, 1, grad_o.data(), c.dim_v_padded);
    load_rows(c.args.o, batch, head, row0 + r, 1, 1, o.data(), c.dim_v_padded);
    c.dterm[c.dterm_index(batch, head, row0 + r)] =
        dot(grad_o.data(), o.data(), static_cast<int>(c.dim_v_padded));
  }
}

// ---- Key/value pass ----

// Per-task tiles, one set per thread kept between tasks and calls (as the
// forward's: fresh pages per task cost page faults).
struct KeyValueTiles {
  void prepare(const BackwardContext& c, bool packed) {
    const std::int64_t keys = c.blocking.key_rows, queries = c.blocking.query_rows;
    k.resize(keys * c.p.dim_qk);
    v.resize(keys * c.p.dim_v);
    p.resize(keys * queries);
    dp.resize(keys * queries);
    grad_k.assign(keys * c.dim_qk_padded, 0.0f);
    grad_v.assign(keys * c.dim_v_padded, 0.0f);
    lse_log2.resize(queries);
    dterm.resize(queries);
    softcap_slope.resize(queries);
    attend.resize(c.mask ? queries : 0);
    if (c.dq_shares != nullptr) {
      k_padded.resize(keys * c.dim_qk_padded);
      ds.resize(queries * keys);
    }
    if (packed) {
      k_a.resize(packed_bf16_a_elements(keys, c.p.dim_qk));
      v_a.resize(packed_bf16_a_elements(keys, c.p.dim_v));
      k_b.resize(packed_bf16_b_elements(keys, static_cast<int>(c.dim_qk_padded)));
      scores_a.resize(packed_bf16_a_elements(std::max(keys, queries), std::max(keys, queries)));
    }
  }

  std::vector<float> k;         // [key_rows, dim_qk]
  std::vector<float> v;         // [key_rows, dim_v]
  std::vector<float> p;         // [key_rows, query_rows]: Sᵀ, then Pᵀ
  std::vector<float> dp;        // [key_rows, query_rows]: dPᵀ, then dSᵀ
  std::vector<float> grad_k;    // [key_rows, dim_qk_padded]
  std::vector<float> grad_v;    // [key_rows, dim_v_padded]
  std::vector<float> lse_log2;  // [query_rows] per column
  std::vector<float> dterm;     // [query_rows] per column
  std::vector<float> softcap_slope;  // [query_rows] 1 - tanh² of one row
  std::vector<std::uint8_t> attend;  // [query_rows] the user mask of one row
  // With dQ shares:
  std::vector<float> k_padded;  // [key_rows, dim_qk_padded]
  std::vector<float> ds;        // [query_rows, key_rows]: dS = (dSᵀ)ᵀ
  // Packed bf16 operands: K and V as A, K as B (dQ's share), and one of Pᵀ,
  // dSᵀ, dS as A at a time.
  std::vector<std::uint16_t> k_a, v_a, k_b, scores_a;
};

// C (+)= A·B for this pass: A given as fp32 (`a`, lda) or, packed, as
// packed A (`a_packed`, or packed from `a` into `scratch` first); B as the
// fp32 tile or packed block of `b`.
struct PassGemm {
  bool packed;
  GemmFunction gemm;

  void operator()(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                  const std::uint16_t* a_packed, std::vector<std::uint16_t>* scratch,
                  const TensorBlocks& b, std::int64_t slot, std::int64_t block, std::int64_t ldb,
                  float* out, std::int64_t ldc, bool accumulate) const {
    if (!packed) {
      gemm(m, n, k, a, lda, b.tile(slot, block), ldb, out, ldc, accumulate);
      return;
    }
    if (a_packed == nullptr) {
      pack_bf16_a(m, k, a, lda, scratch->data());
      a_packed = scratch->data();
    }
    gemm_bf16_packed(m, n, k, a_packed, b.packed(slot, block), b.packed_pitch(), out, ldc,
                     accumulate);
  }
};

void backward_key_value_block(BackwardContext& c, std::int64_t batch, std::int64_t kv_head,
                              std::int64_t block) {
  const Problem& p = c.p;
  const BackwardArgs& a = c.args;
  const QueryBlocks& qb = *c.query_blocks_converted;
  thread_local KeyValueTiles t;
  t.prepare(c, qb.packed);
  const std::int64_t key0 = block * c.blocking.key_rows;
  const std::int64_t keys = std::min(c.blocking.key_rows, p.seq_kv - key0);
  // Whole 16 x 16 blocks of dSᵀ for its transpose.
  const std::int64_t keys_padded = round_up(keys, kTileColumnMultiple);
  const std::int64_t query_ld = c.blocking.query_rows;
  const std::int64_t key_ld = c.blocking.key_rows;
  const PassGemm gemm{qb.packed, gemm_for(p.dtype)};
  const bool shares = c.dq_shares != nullptr;

  load_rows(a.k, batch, kv_head, key0, keys, keys_padded, t.k.data(), p.dim_qk);
  load_rows(a.v, batch, kv_head, key0, keys, keys_padded, t.v.data(), p.dim_v);
  if (shares) {
    load_rows(a.k, batch, kv_head, key0, keys, keys_padded, t.k_padded.data(), c.dim_qk_padded);
  }
  if (qb.packed) {
    pack_bf16_a(keys_padded, p.dim_qk, t.k.data(), p.dim_qk, t.k_a.data());
    pack_bf16_a(keys_padded, p.dim_v, t.v.data(), p.dim_v, t.v_a.data());
    if (shares) {
      pack_bf16_b(keys_padded, c.dim_qk_padded, t.k_padded.data(), c.dim_qk_padded, t.k_b.data());
    }
  }
  const std::uint16_t* k_a = qb.packed ? t.k_a.data() : nullptr;
  const std::uint16_t* v_a = qb.packed ? t.v_a.data() : nullptr;

  const std::int64_t group = p.group_size();
  const std::int64_t pair = batch * p.heads_kv + kv_head;
  for (std::int64_t head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    // This head's slot among the converted query-side blocks.
    const std::int64_t slot = (pair - c.first_pair) * group + head % group;
    const RowRange visited = c.visited_query_blocks(block);
    for (std::int64_t q_block = visited.begin; q_block < visited.end; ++q_block) {
      const std::int64_t q0 = q_block * c.blocking.query_rows;
      const std::int64_t queries = std::min(c.blocking.query_rows, p.seq_q - q0);
      const std::int64_t queries_padded = round_up(queries, kTileColumnMultiple);
      for (std::int64_t col = 0; col < queries_padded; ++col) {
        const bool real = col < queries;
        t.lse_log2[col] = real ? c.lse_log2(batch, head, q0 + col) : 0.0f;
        t.dterm[col] = real ? c.dterm[c.dterm_index(batch, head, q0 + col)] : 0.0f;
      }

      // Sᵀ = K·Qᵀ  [keys_padded, queries_padded]
      gemm(keys_padded, queries_padded, p.dim_qk, t.k.data(), p.dim_qk, k_a, nullptr,
           qb.q_transposed, slot, q_block, query_ld, t.p.data(), query_ld, false);
      // dPᵀ = V·dOᵀ  [keys_padded, queries_padded]
      gemm(keys_padded, queries_padded, p.dim_v, t.v.data(), p.dim_v, v_a, nullptr,
           qb.grad_o_transposed, slot, q_block, query_ld, t.dp.data(), query_ld, false);
      for (std::int64_t r = 0; r < keys_padded; ++r) {
        // Key row r is seen by the queries seeing_queries(key0 + r); padding keys by none.
        const RowRange visible =
            r < keys ? columns_within(seeing_queries(p, key0 + r), q0, queries) : RowRange{};
        float* p_row = t.p.data() + r * query_ld;
        const bool modified =
            c.modify_and_mask(p_row, static_cast<int>(queries_padded), batch, head, q0, key0 + r,
                              true, visible, r < keys, t.softcap_slope.data(), t.attend.data());
        probabilities_row_by_column(p_row, queries_padded, static_cast<int>(visible.begin),
                                    static_cast<int>(visible.end), c.scale_log2,
                                    t.lse_log2.data());
        // dSᵀ = Pᵀ ∘ (dPᵀ - Dterm), in place of dPᵀ
        float* ds_row = t.dp.data() + r * query_ld;
        score_gradient_row_by_column(p_row, ds_row, queries_padded, t.dterm.data());
        c.softcap_chain(ds_row, static_cast<int>(queries_padded), modified, t.softcap_slope.data());
      }
      // dV += Pᵀ·dO  [keys_padded, dim_v_padded]
      gemm(keys_padded, c.dim_v_padded, queries_padded, t.p.data(), query_ld, nullptr, &t.scores_a,
           qb.grad_o, slot, q_block, c.dim_v_padded, t.grad_v.data(), c.dim_v_padded, true);
      // dK += dSᵀ·Q  [keys_padded, dim_qk_padded]
      gemm(keys_padded, c.dim_qk_padded, queries_padded, t.dp.data(), query_ld, nullptr,
           &t.scores_a, qb.q, slot, q_block, c.dim_qk_padded, t.grad_k.data(), c.dim_qk_padded,
           true);
      if (shares) {
        // dS = (dSᵀ)ᵀ  [queries_padded, keys_padded], 16 x 16 blocks
        for (std::int64_t r = 0; r < keys_padded; r += kTileColumnMultiple) {
          for (std::int64_t col = 0; col < queries_padded; col += kTileColumnMultiple) {
            transpose_16x16(t.dp.data() + r * query_ld + col, static_cast<int>(query_ld),
                            t.ds.data() + col * key_ld + r, static_cast<int>(key_ld));
          }
        }
        // dQ_kb = dS·K  [queries_padded, dim_qk_padded]
        float* share = c.dq_share(pair, head, block) + q0 * c.dim_qk_padded;
        if (qb.packed) {
          pack_bf16_a(queries_padded, keys_padded, t.ds.data(), key_ld, t.scores_a.data());
          gemm_bf16_packed(queries_padded, c.dim_qk_padded, keys_padded, t.scores_a.data(),
                           t.k_b.data(), packed_bf16_b_pitch(c.dim_qk_padded), share,
                           c.dim_qk_padded, false);
        } else {
          gemm.gemm(queries_padded, c.dim_qk_padded, keys_padded, t.ds.data(), key_ld,
                    t.k_padded.data(), c.dim_qk_padded, share, c.dim_qk_padded, false);
        }
      }
    }
  }
  store_rows(a.grad_k, batch, kv_head, key0, keys, t.grad_k.data(), c.dim_qk_padded,
             static_cast<float>(p.scale));
  store_rows(a.grad_v, batch, kv_head, key0, keys, t.grad_v.data(), c.dim_v_padded, 1.0f);
}

// ---- dQ from its shares ----

void sum_query_block(BackwardContext& c, std::int64_t batch, std::int64_t head,
                     std::int64_t block) {
  const std::int64_t row0 = block * c.blocking.query_rows;
  const std::int64_t rows = std::min(c.blocking.query_rows, c.p.seq_q - row0);
  const std::int64_t floats = rows * c.dim_qk_padded;
  std::vector<float> grad_q(floats, 0.0f);  // [rows, dim_qk_padded]
  const std::int64_t pair = batch * c.p.heads_kv + head / c.p.group_size();
  // Key blocks in order; one whose task does not visit this block has no share.
  for (std::int64_t key_block = 0; key_block < c.key_blocks(); ++key_block) {
    const RowRange visited = c.visited_query_blocks(key_block);
    if (block < visited.begin || block >= visited.end) continue;
    const float* share = c.dq_share(pair, head, key_block) + row0 * c.dim_qk_padded;
    for (std::int64_t i = 0; i < floats; ++i) grad_q[i] += share[i];
  }
  store_rows(c.args.grad_q, batch, head, row0, rows, grad_q.data(), c.dim_qk_padded,
             static_cast<float>(c.p.scale));
}

// At most this much memory for dQ's shares (one (batch, kv head) pair's
// shares are 2 x 8 key blocks x 2048 x 128 fp32 = 8 MiB at N = 2048, D = 128).
constexpr std::int64_t kShareBudgetBytes = std::int64_t{256} << 20;

}  // namespace

void backward(const Problem& p, const BackwardArgs& args, int threads) {
  BackwardContext c{p,
                    args,
                    choose_blocking(p),
                    round_up(p.dim_qk, kTileColumnMultiple),
                    round_up(p.dim_v, kTileColumnMultiple),
                    ScoreModifier(p),
                    ScoreModifier(p).scale_log2(),
                    std::vector<float>(p.batch * p.heads_q * p.seq_q)};
  if (p.has_mask()) c.mask.emplace(p);

  const std::int64_t query_blocks = c.query_blocks(), key_blocks = c.key_blocks();
  parallel_for(p.batch * p.heads_q * query_blocks, threads, [&](std::int64_t task) {
    dterm_block(c, task / query_blocks / p.heads_q, task / query_blocks % p.heads_q,
                task % query_blocks);
  });
  if (p.has_sinks()) write_sink_gradient(p, args.lse, c.dterm, threads);

  // (batch, kv head) pairs a pass at a time: Q and dO of their query heads
  // converted once, dQ's shares (unless the query pass computes dQ).
  const std::int64_t group = p.group_size();
  const bool packed = p.dtype == DType::bf16 && has_packed_bf16_gemm();
  const std::int64_t query_rows = c.blocking.query_rows;
  const std::int64_t query_side_bytes =
      group *
      (TensorBlocks::head_bytes(args.q, query_rows, BlockForm::transposed, 0, packed) +
       TensorBlocks::head_bytes(args.q, query_rows, BlockForm::rows, c.dim_qk_padded, packed) +
       TensorBlocks::head_bytes(args.grad_o, query_rows, BlockForm::transposed, 0, packed) +
       TensorBlocks::head_bytes(args.grad_o, query_rows, BlockForm::rows, c.dim_v_padded, packed));
  const std::int64_t share_bytes =
      group * key_blocks * c.share_floats() * std::int64_t{sizeof(float)};
  const char* forced = std::getenv("FLASHGEN_CPU_BACKWARD");
  const bool query_pass = share_bytes > kShareBudgetBytes ||
                          (forced != nullptr && std::string_view(forced) == "query_pass");
  const std::int64_t pair_bytes = query_side_bytes + (query_pass ? 0 : share_bytes);
  const std::int64_t pairs = p.batch * p.heads_kv;
  const std::int64_t per_pass =
      std::clamp<std::int64_t>(kShareBudgetBytes / std::max<std::int64_t>(pair_bytes, 1), 1,
                               std::max<std::int64_t>(pairs, 1));

  if (query_pass) {
    parallel_for(p.batch * p.heads_q * query_blocks, threads, [&](std::int64_t task) {
      // Causal: later query blocks see more keys; hand them out first.
      const std::int64_t block = query_blocks - 1 - task % query_blocks;
      const std::int64_t batch_head = task / query_blocks;
      backward_query_block(c, batch_head / p.heads_q, batch_head % p.heads_q, block);
    });
  }

  const std::int64_t heads_per_pass = per_pass * group;
  QueryBlocks blocks{
      TensorBlocks(args.q, query_rows, BlockForm::transposed, 0, packed, heads_per_pass),
      TensorBlocks(args.q, query_rows, BlockForm::rows, c.dim_qk_padded, packed, heads_per_pass),
      TensorBlocks(args.grad_o, query_rows, BlockForm::transposed, 0, packed, heads_per_pass),
      TensorBlocks(args.grad_o, query_rows, BlockForm::rows, c.dim_v_padded, packed,
                   heads_per_pass),
      packed};
  c.query_blocks_converted = &blocks;
  // Left uninitialized (zeroing would cost a pass over memory as large as
  // the GEMM operands): every share a sum reads is written by its key/value
  // task first.
  const PooledBuffer shares = pooled_buffer(
      query_pass ? 0 : per_pass * group * key_blocks * c.share_floats() * sizeof(float));
  c.dq_shares = query_pass ? nullptr : static_cast<float*>(shares.get());
  for (std::int64_t first = 0; first < pairs; first += per_pass) {
    const std::int64_t count = std::min(per_pass, pairs - first);
    c.first_pair = first;
    // Query heads of pairs [first, first + count) are [first · group, (first + count) · group).
    for (TensorBlocks* converted :
         {&blocks.q_transposed, &blocks.q, &blocks.grad_o_transposed, &blocks.grad_o}) {
      converted->convert(first * group, count * group, threads);
    }
    // Causal: earlier key blocks are seen by more queries; hand them out first.
    parallel_for(count * key_blocks, threads, [&](std::int64_t task) {
      const std::int64_t pair = first + task / key_blocks;
      backward_key_value_block(c, pair / p.heads_kv, pair % p.heads_kv, task % key_blocks);
    });
    if (query_pass) continue;
    parallel_for(count * group * query_blocks, threads, [&](std::int64_t task) {
      const std::int64_t pair = first + task / query_blocks / group;
      const std::int64_t head = pair % p.heads_kv * group + task / query_blocks % group;
      sum_query_block(c, pair / p.heads_kv, head, task % query_blocks);
    });
  }
}

}  // namespace flashgen::cpu
