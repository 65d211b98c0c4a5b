// CPU flash forward: one task per (batch, query head, block of query rows).
// The task streams key/value blocks through an online softmax in the log2
// domain and never holds more than one [query block, key block] score tile.
//
//   S = Q·Kᵀ                     fp32, [rows, keys]
//   m' = max(m, rowmax(S·c))     c = scale·log2(e); masked scores = kMaskedScore
//   P = exp2(S·c - m')
//   l' = l·exp2(m - m') + rowsum(P)
//   O' = O·exp2(m - m') + P·V
// and at the end O / l and LSE = (m + log2 l)·ln 2 (natural log for the API).
// Soft cap and ALiBi rewrite S's rows before the softmax step (score_mods.hpp,
// c is then log2 e); a sink starts each row as a column already seen: m =
// sink·log2 e, l = 1, O = 0. Key blocks outside the causal and window masks
// are skipped (blocking.hpp: key_blocks_seen), and so are tiles the user
// mask leaves no pair of: it is evaluated for a tile before its GEMM, and
// the masked scores get kMaskedScore after the modifiers (mask_program.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <vector>

#include "common/problem.hpp"
#include "cpu/blocking.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/mask_program.hpp"
#include "cpu/score_mods.hpp"
#include "cpu/tensor_blocks.hpp"
#include "cpu/thread_pool.hpp"
#include "cpu/tile_io.hpp"
#include "cpu/tile_math.hpp"

namespace flashgen::cpu {
namespace {

// Per-task fp32 tiles; padded rows and columns are zero. One set per thread,
// kept from task to task and call to call: allocated per task, the score tile
// alone (256 KiB) could come back from the OS with fresh pages each time.
struct ForwardTiles {
  void prepare(const Problem& p, const Blocking& b) {
    dim_v_padded = round_up(p.dim_v, kTileColumnMultiple);
    q.resize(b.query_rows * p.dim_qk);
    scores.resize(b.query_rows * b.key_rows);
    o.resize(b.query_rows * dim_v_padded);
    row_max.resize(b.query_rows);
    row_sum.resize(b.query_rows);
    if (p.has_mask()) attend.resize(b.query_rows * b.key_rows);
  }

  std::int64_t dim_v_padded = 0;
  std::vector<float> q;             // [query_rows, dim_qk]
  std::vector<float> scores;        // [query_rows, key_rows]: S, then P (fp32 GEMMs)
  std::vector<float> o;             // [query_rows, dim_v_padded] unnormalized accumulator
  std::vector<float> row_max;       // [query_rows] running max of S·c (log2 units)
  std::vector<float> row_sum;       // [query_rows] running Σ exp2(S·c - max)
  std::vector<std::uint8_t> attend; // [query_rows, key_rows] the user mask of a tile
  // Packed bf16 GEMM operands (KeyValueBlocks::packed_bf16):
  std::vector<std::uint16_t> q_packed;  // Q as A
  std::vector<std::uint16_t> p_packed;  // P as A
};

// K and V converted once per pass: Kᵀ and V blocks, fp32 or packed bf16.
struct KeyValueBlocks {
  TensorBlocks k_transposed, v;
  bool packed_bf16;
};

// One query block of head `head`, whose kv head's blocks sit at `slot` of
// `kv`.
// The user mask of a tile's visible pairs into t.attend; false when no pair
// of the tile is attended (the tile is then skipped: it adds nothing).
bool evaluate_mask(const Problem& p, const MaskProgram& mask, ForwardTiles& t, std::int64_t batch,
                   std::int64_t head, std::int64_t row0, std::int64_t rows, std::int64_t key0,
                   std::int64_t keys, std::int64_t key_ld) {
  int attended = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const RowRange visible = columns_within(visible_keys(p, row0 + r), key0, keys);
    // The mask's q_idx is the row's position among the keys (the diagonal).
    attended += mask.evaluate(batch, head, p.diagonal_offset() + row0 + r, 0,
                              key0 + visible.begin, 1, static_cast<int>(visible.size()),
                              t.attend.data() + r * key_ld + visible.begin);
  }
  return attended > 0;
}

void forward_query_block(const Problem& p, const ForwardArgs& args, const Blocking& blocking,
                         const KeyValueBlocks& kv, const MaskProgram* mask, std::int64_t slot,
                         std::int64_t batch, std::int64_t head, std::int64_t block) {
  thread_local ForwardTiles t;
  t.prepare(p, blocking);
  const std::int64_t row0 = block * blocking.query_rows;
  const std::int64_t rows = std::min(blocking.query_rows, p.seq_q - row0);
  const std::int64_t rows_padded = round_up(rows, kTileRowMultiple);
  const std::int64_t key_ld = blocking.key_rows;
  const ScoreModifier mods(p);
  const float scale_log2 = mods.scale_log2();
  const GemmFunction gemm = gemm_for(p.dtype);

  load_rows(args.q, batch, head, row0, rows, rows_padded, t.q.data(), p.dim_qk);
  if (kv.packed_bf16) {
    t.q_packed.resize(packed_bf16_a_elements(rows_padded, p.dim_qk));
    t.p_packed.resize(packed_bf16_a_elements(rows_padded, blocking.key_rows));
    pack_bf16_a(static_cast<int>(rows_padded), static_cast<int>(p.dim_qk), t.q.data(),
                static_cast<int>(p.dim_qk), t.q_packed.data());
  }
  std::fill(t.o.begin(), t.o.end(), 0.0f);
  std::fill(t.row_max.begin(), t.row_max.end(), kMaskedScore);
  std::fill(t.row_sum.begin(), t.row_sum.end(), 0.0f);
  if (p.has_sinks()) {
    // The sink as a column every real row has already seen.
    const auto sink_log2 = static_cast<float>(p.sink(head) * std::numbers::log2e);
    std::fill(t.row_max.begin(), t.row_max.begin() + rows, sink_log2);
    std::fill(t.row_sum.begin(), t.row_sum.begin() + rows, 1.0f);
  }

  // Key blocks no row of the block sees are never read.
  const RowRange key_blocks = key_blocks_seen(p, blocking, row0, rows);
  for (std::int64_t key_block = key_blocks.begin; key_block < key_blocks.end; ++key_block) {
    const std::int64_t key0 = key_block * blocking.key_rows;
    const std::int64_t keys = std::min(blocking.key_rows, p.seq_kv - key0);
    const std::int64_t keys_padded = round_up(keys, kTileColumnMultiple);
    if (mask && !evaluate_mask(p, *mask, t, batch, head, row0, rows, key0, keys, key_ld)) continue;

    // S = Q·Kᵀ  [rows_padded, keys_padded]
    if (kv.packed_bf16) {
      gemm_bf16_packed(rows_padded, keys_padded, p.dim_qk, t.q_packed.data(),
                       kv.k_transposed.packed(slot, key_block), kv.k_transposed.packed_pitch(),
                       t.scores.data(), key_ld, false);
    } else {
      gemm(rows_padded, keys_padded, p.dim_qk, t.q.data(), p.dim_qk,
           kv.k_transposed.tile(slot, key_block), key_ld, t.scores.data(), key_ld, false);
    }
    // With the packed bf16 GEMM the softmax writes P as the P·V GEMM's packed
    // A, one row at a time; the rows past rows_padded are zero.
    const int p_pitch = packed_bf16_a_pitch(static_cast<int>(keys_padded));
    if (kv.packed_bf16) {
      std::fill(t.p_packed.begin() + rows_padded * p_pitch,
                t.p_packed.begin() + round_up(rows_padded, kPackedBf16Multiple) * p_pitch,
                std::uint16_t{0});
    }
    for (std::int64_t r = 0; r < rows_padded; ++r) {
      // Padding rows (r >= rows) see nothing; their results are discarded.
      const RowRange visible =
          r < rows ? columns_within(visible_keys(p, row0 + r), key0, keys) : RowRange{};
      float* s_row = t.scores.data() + r * key_ld;
      if (mods.active() && r < rows)
        mods.query_row(s_row, static_cast<int>(keys_padded), batch, head, row0 + r, key0, nullptr);
      if (mask && r < rows)
        mask_scores(s_row, t.attend.data() + r * key_ld, static_cast<int>(visible.begin),
                    static_cast<int>(visible.end));
      const float correction =
          kv.packed_bf16
              ? online_softmax_row_bf16(s_row, static_cast<int>(keys_padded),
                                        static_cast<int>(visible.begin),
                                        static_cast<int>(visible.end), scale_log2, t.row_max[r],
                                        t.row_sum[r], t.p_packed.data() + r * p_pitch)
              : online_softmax_row(s_row, static_cast<int>(keys_padded),
                                   static_cast<int>(visible.begin), static_cast<int>(visible.end),
                                   scale_log2, t.row_max[r], t.row_sum[r]);
      // Once the row's max settles the factor is exactly 1: nothing to rescale.
      if (correction != 1.0f)
        scale_inplace(t.o.data() + r * t.dim_v_padded, t.dim_v_padded, correction);
    }
    // O += P·V  [rows_padded, dim_v_padded]; masked and padding P entries are 0.
    if (kv.packed_bf16) {
      gemm_bf16_packed(rows_padded, t.dim_v_padded, keys_padded, t.p_packed.data(),
                       kv.v.packed(slot, key_block), kv.v.packed_pitch(), t.o.data(),
                       t.dim_v_padded, true);
    } else {
      gemm(rows_padded, t.dim_v_padded, keys_padded, t.scores.data(), key_ld,
           kv.v.tile(slot, key_block), t.dim_v_padded, t.o.data(), t.dim_v_padded, true);
    }
  }

  const Strides3 lse_strides = strides_of(args.lse);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float sum = t.row_sum[r];
    // A row that sees no key (causal, seq_q > seq_kv; a window) has sum 0:
    // O = 0, LSE = -inf (with a sink, sum 1: O = 0, LSE = the sink).
    const bool empty = sum == 0.0f;
    store_rows(args.o, batch, head, row0 + r, 1, t.o.data() + r * t.dim_v_padded,
               t.dim_v_padded, empty ? 0.0f : 1.0f / sum);
    if (args.lse.data != nullptr) {
      const float lse = empty ? -INFINITY
                              : (t.row_max[r] + std::log2(sum)) * std::numbers::ln2_v<float>;
      args.lse.data[batch * lse_strides.batch + head * lse_strides.heads +
                    (row0 + r) * lse_strides.seq] = lse;
    }
  }
}

// At most this much memory for the converted K and V (one kv head's are
// always converted): 2 x 2048 keys x D = 128 in fp32 is 2 MiB a head.
constexpr std::int64_t kBlockBudgetBytes = std::int64_t{64} << 20;

}  // namespace

void forward(const Problem& p, const ForwardArgs& args, int threads) {
  const Blocking blocking = choose_blocking(p);
  const std::int64_t blocks = ceil_div(p.seq_q, blocking.query_rows);
  const std::int64_t group = p.group_size();
  std::optional<MaskProgram> mask;
  if (p.has_mask()) mask.emplace(p);
  const std::int64_t dim_v_padded = round_up(p.dim_v, kTileColumnMultiple);
  const bool packed = p.dtype == DType::bf16 && has_packed_bf16_gemm();
  // kv heads (batch · heads_kv + kv head) a pass at a time: their K and V
  // converted once, then every query block of their query heads.
  const std::int64_t pairs = p.batch * p.heads_kv;
  const std::int64_t pair_bytes =
      TensorBlocks::head_bytes(args.k, blocking.key_rows, BlockForm::transposed, 0, packed) +
      TensorBlocks::head_bytes(args.v, blocking.key_rows, BlockForm::rows, dim_v_padded, packed);
  const std::int64_t per_pass =
      std::clamp<std::int64_t>(kBlockBudgetBytes / std::max<std::int64_t>(pair_bytes, 1), 1,
                               std::max<std::int64_t>(pairs, 1));
  KeyValueBlocks kv{
      TensorBlocks(args.k, blocking.key_rows, BlockForm::transposed, 0, packed, per_pass),
      TensorBlocks(args.v, blocking.key_rows, BlockForm::rows, dim_v_padded, packed, per_pass),
      packed};
  for (std::int64_t first = 0; first < pairs; first += per_pass) {
    const std::int64_t count = std::min(per_pass, pairs - first);
    kv.k_transposed.convert(first, count, threads);
    kv.v.convert(first, count, threads);
    parallel_for(count * group * blocks, threads, [&](std::int64_t task) {
      // Later query blocks see more keys under a causal mask: hand them out
      // first so the last tasks to finish are short.
      const std::int64_t block = blocks - 1 - task % blocks;
      const std::int64_t slot = task / blocks / group;
      const std::int64_t pair = first + slot;
      const std::int64_t head = pair % p.heads_kv * group + task / blocks % group;
      forward_query_block(p, args, blocking, kv, mask ? &*mask : nullptr, slot, pair / p.heads_kv,
                          head, block);
    });
  }
}

}  // namespace flashgen::cpu
