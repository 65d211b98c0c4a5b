// Decode reads every key and value once per query; with GQA, the query heads
// of a group would each read their key/value head again (from L2 at best).
// Restated with the heads as rows, one CTA holds the whole group and streams
// K and V once. Only views change: no copy, no other kernel.
#include "cuda/query_head_packing.hpp"

namespace flashgen::cuda {
namespace {

// Whether the restatement computes the same thing: one query row, a group to
// pack, and nothing that tells query heads apart beyond their row (the
// options below are refused on CUDA today; packing must not hide them). With
// one query, bottom-right causal attends every key, so causal is dropped.
bool packable(const Problem& p) {
  return p.seq_q == 1 && p.heads_kv > 0 && p.group_size() > 1 && !p.has_window() &&
         !p.modifies_scores() && !p.has_sinks() && !p.has_mask() &&
         !(p.causal && p.causal_alignment == CausalAlignment::top_left);
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

ForwardLaunch pack_query_heads(const Problem& p, const ForwardArgs& args) {
  if (!packable(p)) return {p, args};
  const std::int64_t group = p.group_size();
  ForwardLaunch packed{p, args};
  packed.problem.seq_q = group;
  packed.problem.heads_q = p.heads_kv;
  packed.problem.causal = false;
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
