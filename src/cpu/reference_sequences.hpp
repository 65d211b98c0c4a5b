// The oracle for ragged batches: the reference of cpu/reference.hpp run
// once per sequence over its slice of the packed inputs, and the KV cache
// (append included) restated as a ragged batch by plain indexing.
//
// Packed inputs hold the sequences' rows one after another:
//   q [1, total_q, heads_q, dim_qk], k [1, total_k, heads_kv, dim_qk], ...
// results likewise, lse [1, heads_q, total_q].
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/reference.hpp"
#include "flashgen/sequences.hpp"

namespace flashgen::cpu {

// Sequence b: query rows [q_begin[b], q_begin[b + 1]), key rows [k_begin[b], k_begin[b + 1]).
struct Sequences {
  std::vector<std::int64_t> q_begin, k_begin;
};

enum class Oracle { fp64, naive_same_dtype };

// packed: the problem of the packed tensors (batch 1, seq_q = total_q,
// seq_kv = total_k); each sequence is that problem with its own lengths.
ForwardResult reference_forward_varlen(const Problem& packed, const Sequences& sequences,
                                       const PackedInputs& in, Oracle oracle);
BackwardResult reference_backward_varlen(const Problem& packed, const Sequences& sequences,
                                         const PackedInputs& in, Oracle oracle,
                                         ForwardResult* forward = nullptr);

// A KV-cache call as a ragged batch: q's rows (seq_q per sequence) and each
// sequence's keys and values after the append: cache rows [0,
// cache_seqlens[b]) then the k_new / v_new rows. Reads host views before the
// call (which writes the cache). `packed` gets batch 1 and the totals. An
// e4m3 cache's values are taken as the call defines them
// (KVCacheForwardArgs::k_scale): cached e4m3 · scale, appended rows as
// stored (x / scale in e4m3) times the scale; `rounded`: each then rounded
// to q's dtype, as a computation in that dtype holds them (the naive
// oracle's inputs), otherwise exact (the fp64 reference's).
struct KVCacheAsVarlen {
  Problem packed;
  Sequences sequences;
  PackedInputs in;
};
KVCacheAsVarlen kvcache_as_varlen(const KVCacheForwardArgs& args, const Problem& per_sequence,
                                  bool rounded);

}  // namespace flashgen::cpu
