// The decode restatement's views: every query head's row lands where the
// packed view puts it, and calls it must not restate come back unchanged.
#include <gtest/gtest.h>

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
  return a;
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

TEST(QueryHeadPacking, LeavesOtherCallsAsTheyAre) {
  std::vector<Problem> unchanged;
  Problem several_queries = decode_problem(8, 2);
  several_queries.seq_q = 2;
  unchanged.push_back(several_queries);
  unchanged.push_back(decode_problem(4, 4));  // no group to pack
  Problem top_left = decode_problem(8, 2);
  top_left.causal_alignment = CausalAlignment::top_left;  // row 0 sees key 0 only
  unchanged.push_back(top_left);
  Problem window = decode_problem(8, 2);
  window.window_left = 16;
  unchanged.push_back(window);
  for (const Problem& p : unchanged) {
    const ForwardArgs args = decode_args(p, false);
    const ForwardLaunch same = pack_query_heads(p, args);
    EXPECT_EQ(same.problem.seq_q, p.seq_q);
    EXPECT_EQ(same.problem.heads_q, p.heads_q);
    EXPECT_EQ(same.problem.causal, p.causal);
    EXPECT_EQ(same.args.q.stride[1], args.q.stride[1]);
    EXPECT_EQ(same.args.q.shape[2], args.q.shape[2]);
  }
}

}  // namespace
}  // namespace flashgen::cuda
