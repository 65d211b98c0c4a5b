// Decode reads every key and value once per query; with GQA, the query heads
// of a group would each read their key/value head again (from L2 at best).
// Restated with the heads as rows, one CTA holds the whole group and streams
// K and V once. Only views change: no copy, no other kernel.
#include "cuda/query_head_packing.hpp"

namespace flashgen::cuda {
namespace {

// Keys [first, first + count) of a [batch, seq, heads, dim] tensor.
TensorView key_range(const TensorView& t, std::int64_t first, std::int64_t count) {
  TensorView range = t;
  range.data = static_cast<char*>(t.data) + first * t.stride[1] * size_of(t.dtype);
  range.shape[1] = count;
  return range;
}

// [batch, 1, heads_q, dim] as [batch, group, heads_kv, dim].
TensorView heads_as_rows(const TensorView& t, std::int64_t group, std::int64_t heads_kv) {
  TensorView packed = t;
  packed.shape[1] = group;
  packed.shape[2] = heads_kv;
  packed.stride[1] = t.stride[2];
  packed.stride[2] = t.stride[2] * group;
  return packed;
}

}  // namespace

// Whether the restatement computes the same thing: one query row, a group
// to pack, keys for it to see, and nothing that tells query heads apart
// beyond their row but a sink (read by row: ForwardLaunch). ALiBi's slope
// would need each row's head; a user mask may read neither h nor q_idx
// (a row's), nor see its keys moved by a window. The soft cap treats every
// score alike.
bool packs_query_heads(const Problem& p) {
  if (p.seq_q != 1 || p.heads_kv <= 0 || p.group_size() < 2 || p.alibi_slopes.given())
    return false;
  // A KV cache's keys are counted per batch entry in the kernel: only a
  // query that sees them all packs (no window, no top-left causal).
  if (p.kv_cache.given() &&
      (p.has_window() || (p.causal && p.causal_alignment == CausalAlignment::top_left)))
    return false;
  const RowRange keys = visible_keys(p, 0);
  if (keys.empty()) return false;
  if (!p.has_mask()) return true;
  const mask::Expression& e = p.mask->expression;
  return !e.uses(mask::Op::head) && !e.uses(mask::Op::query) && keys.begin == 0;
}

Problem packed_problem(const Problem& p) {
  const std::int64_t group = p.group_size();
  Problem packed = p;
  packed.seq_q = group;
  packed.heads_q = p.heads_kv;
  // The keys the one query sees, with no mask left.
  packed.seq_kv = visible_keys(p, 0).size();
  packed.causal = false;
  packed.causal_alignment = CausalAlignment::bottom_right;
  packed.window_left = packed.window_right = -1;
  if (p.has_sinks()) {
    // Sink of query head g·group + r: head g's stride, row r's (ForwardLaunch).
    packed.sinks.shape[0] = p.heads_kv;
    packed.sinks.stride[0] = p.sinks.stride[0] * group;
  }
  return packed;
}

ForwardLaunch pack_query_heads(const Problem& p, const ForwardArgs& args) {
  if (!packs_query_heads(p)) return {p, args};
  const std::int64_t group = p.group_size();
  ForwardLaunch packed{packed_problem(p), args};
  const RowRange keys = visible_keys(p, 0);
  if (!p.kv_cache.given()) {  // a cache's query sees all of its keys
    packed.args.k = key_range(args.k, keys.begin, keys.size());
    packed.args.v = key_range(args.v, keys.begin, keys.size());
  }
  if (p.has_sinks()) packed.sinks_row_stride = p.sinks.stride[0];
  packed.args.q = heads_as_rows(args.q, group, p.heads_kv);
  packed.args.o = heads_as_rows(args.o, group, p.heads_kv);
  if (args.lse.data != nullptr) {
    // [batch, heads_q, 1] as [batch, heads_kv, group].
    packed.args.lse.shape[1] = p.heads_kv;
    packed.args.lse.shape[2] = group;
    packed.args.lse.stride[2] = args.lse.stride[1];
    packed.args.lse.stride[1] = args.lse.stride[1] * group;
  }
  return packed;
}

}  // namespace flashgen::cuda
