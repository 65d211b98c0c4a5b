// Decode under GQA with the query heads of one key/value head as the rows of
// one tile (see query_head_packing.cpp).
#pragma once

#include "common/problem.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {

// A forward problem and its tensors, as the kernels are to see them.
struct ForwardLaunch {
  Problem problem;
  ForwardArgs args;
  // Packed with sinks: the sink of row r of head g is problem.sinks' element
  // g·stride + r·sinks_row_stride (0: one sink per head). Only the split-key
  // forward's combine reads sinks by row.
  std::int64_t sinks_row_stride = 0;
};

// With one query per sequence and several query heads per key/value head, the
// same call restated with the group's query heads as the query rows of one
// key/value head: [batch, 1, heads_q, dim] seen as [batch, group, heads_kv,
// dim] (row r of kv head g is query head g·group + r), LSE [batch, heads_q, 1]
// as [batch, heads_kv, group]. K and V are then read once per key/value head
// instead of once per query head. The one query's causal and window masks
// become a range of keys: K and V are seen from its first key to its last.
// Any other call (ALiBi, a user mask that reads the head or the query:
// scores that differ by row) is returned as it is.
ForwardLaunch pack_query_heads(const Problem& p, const ForwardArgs& args);

// Whether pack_query_heads restates the call, and the problem it restates
// it as (packs_query_heads(p) must hold): what flashgen precompile compiles
// decode's kernels for.
bool packs_query_heads(const Problem& p);
Problem packed_problem(const Problem& p);

}  // namespace flashgen::cuda
