// The decode restatement's views: every query head's row lands where the
// packed view puts it, and calls it must not restate come back unchanged.
#include <gtest/gtest.h>

#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/query_head_packing.hpp"

namespace flashgen::cuda {
namespace {

Problem decode_problem(std::int64_t heads_q, std::int64_t heads_kv) {
  Problem p;
  p.batch = 2;
  p.seq_q = 1;
  p.seq_kv = 300;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.dim_qk = p.dim_v = 72;
  p.causal = true;
  p.scale = 0.125;
  return p;
}

// [batch, 1, heads_q, dim] in the BSHD or BHSD layout, with its LSE.
ForwardArgs decode_args(const Problem& p, bool bhsd) {
  ForwardArgs a;
  static float lse_storage[1];
  for (TensorView* t : {&a.q, &a.o}) {
    *t = bhsd ? TensorView::bhsd(reinterpret_cast<void*>(0x1000), DType::bf16, p.batch, 1,
                                 p.heads_q, p.dim_qk)
              : TensorView::bshd(reinterpret_cast<void*>(0x1000), DType::bf16, p.batch, 1,
                                 p.heads_q, p.dim_qk);
  }
  a.lse = RowStatsView::contiguous(lse_storage, p.batch, p.heads_q, 1);
  for (TensorView* t : {&a.k, &a.v})
    *t = TensorView::bshd(reinterpret_cast<void*>(0x100000), DType::bf16, p.batch, p.seq_kv,
                          p.heads_kv, p.dim_qk);
  return a;
}

// A mask expression bound to no array.
std::shared_ptr<const mask::BoundMask> mask_of(const char* text) {
  return std::make_shared<const mask::BoundMask>(
      mask::BoundMask{mask::Expression::parse(text, {}), {}});
}

std::int64_t offset(const TensorView& t, std::int64_t b, std::int64_t s, std::int64_t h) {
  return b * t.stride[0] + s * t.stride[1] + h * t.stride[2];
}

TEST(QueryHeadPacking, EveryHeadKeepsItsAddress) {
  for (bool bhsd : {false, true}) {
    const Problem p = decode_problem(12, 3);
    const ForwardArgs args = decode_args(p, bhsd);
    const ForwardLaunch packed = pack_query_heads(p, args);
    EXPECT_EQ(packed.problem.seq_q, 4);
    EXPECT_EQ(packed.problem.heads_q, 3);
    EXPECT_EQ(packed.problem.heads_kv, 3);
    EXPECT_FALSE(packed.problem.causal);  // one query row attends every key
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t kv = 0; kv < 3; ++kv)
        for (std::int64_t row = 0; row < 4; ++row) {
          const std::int64_t head = kv * 4 + row;
          EXPECT_EQ(offset(packed.args.q, b, row, kv), offset(args.q, b, 0, head));
          EXPECT_EQ(offset(packed.args.o, b, row, kv), offset(args.o, b, 0, head));
          const RowStatsView& l = packed.args.lse;
          EXPECT_EQ(b * l.stride[0] + kv * l.stride[1] + row * l.stride[2],
                    b * args.lse.stride[0] + head * args.lse.stride[1]);
        }
  }
}

// The one query's causal and window masks become the keys K and V are seen
// over; top-left causal sees key 0 alone.
TEST(QueryHeadPacking, MasksOfTheOneQueryBecomeARangeOfKeys) {
  Problem window = decode_problem(8, 2);
  window.window_left = 16;
  Problem top_left = decode_problem(8, 2);
  top_left.causal_alignment = CausalAlignment::top_left;
  for (const auto& [p, first, count] :
       {std::tuple{window, 300 - 17, 17}, std::tuple{top_left, 0, 1}}) {
    const ForwardArgs args = decode_args(p, false);
    const ForwardLaunch packed = pack_query_heads(p, args);
    EXPECT_EQ(packed.problem.seq_q, 4);
    EXPECT_EQ(packed.problem.seq_kv, count);
    EXPECT_FALSE(packed.problem.causal);
    EXPECT_FALSE(packed.problem.has_window());
    for (const auto& [range, whole] : {std::pair{packed.args.k, args.k}, {packed.args.v, args.v}}) {
      EXPECT_EQ(range.shape[1], count);
      EXPECT_EQ(static_cast<char*>(range.data) - static_cast<char*>(whole.data),
                first * whole.stride[1] * 2);
    }
  }
}

// Sinks stay per query head: row r of kv head g reads head g·group + r's.
TEST(QueryHeadPacking, SinksAreReadByRow) {
  Problem p = decode_problem(12, 3);
  static float sinks[24];
  p.sinks = HeadVectorView::heads(sinks, 12);
  p.sinks.stride[0] = 2;
  const ForwardLaunch packed = pack_query_heads(p, decode_args(p, false));
  EXPECT_EQ(packed.problem.heads_q, 3);
  for (std::int64_t g = 0; g < 3; ++g)
    for (std::int64_t r = 0; r < 4; ++r)
      EXPECT_EQ(g * packed.problem.sinks.stride[0] + r * packed.sinks_row_stride, (g * 4 + r) * 2);
}

TEST(QueryHeadPacking, LeavesOtherCallsAsTheyAre) {
  std::vector<Problem> unchanged;
  Problem several_queries = decode_problem(8, 2);
  several_queries.seq_q = 2;
  unchanged.push_back(several_queries);
  unchanged.push_back(decode_problem(4, 4));  // no group to pack
  Problem alibi = decode_problem(8, 2);
  static float slopes[8];
  alibi.alibi_slopes = HeadVectorView::heads(slopes, 8);  // a slope per row
  unchanged.push_back(alibi);
  for (const char* text : {"kv_idx <= q_idx - 3", "h != 2 || kv_idx < 10"}) {
    Problem masked = decode_problem(8, 2);  // the mask reads a row's query or head
    masked.mask = mask_of(text);
    unchanged.push_back(masked);
  }
  Problem masked_window = decode_problem(8, 2);  // the window would move kv_idx
  masked_window.window_left = 16;
  masked_window.mask = mask_of("kv_idx % 3 != 0");
  unchanged.push_back(masked_window);
  Problem nothing_seen = decode_problem(8, 2);
  nothing_seen.causal_alignment = CausalAlignment::top_left;
  nothing_seen.window_left = 16;  // keys [283, 0]
  unchanged.push_back(nothing_seen);
  for (const Problem& p : unchanged) {
    const ForwardArgs args = decode_args(p, false);
    const ForwardLaunch same = pack_query_heads(p, args);
    EXPECT_EQ(same.problem.seq_q, p.seq_q);
    EXPECT_EQ(same.problem.heads_q, p.heads_q);
    EXPECT_EQ(same.problem.seq_kv, p.seq_kv);
    EXPECT_EQ(same.problem.causal, p.causal);
    EXPECT_EQ(same.args.q.stride[1], args.q.stride[1]);
    EXPECT_EQ(same.args.q.shape[2], args.q.shape[2]);
  }
  // A mask of the keys alone packs.
  Problem keys_alone = decode_problem(8, 2);
  keys_alone.mask = mask_of("kv_idx % 3 != b");
  EXPECT_EQ(pack_query_heads(keys_alone, decode_args(keys_alone, false)).problem.seq_q, 4);
}

}  // namespace
}  // namespace flashgen::cuda
