// Validation of the varlen and KV-cache entry points (flashgen/sequences.hpp):
// the tensors' rules (as the plain calls check them), the index arrays'
// shapes, then their values where the host reads them (device memory is
// read only after the CUDA backend's reachability check). The varlen and
// the host's KV-cache problems split into one plain Problem per sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "common/problem.hpp"
#include "flashgen/sequences.hpp"

namespace flashgen::api {

struct VarlenProblem {
  Problem packed;  // batch 1, seq_q = total_q, seq_kv = total_k; heads, dims, dtype, scale, causal
  // [batch + 1], from cu_seqlens_q / cu_seqlens_k; empty where the kernels
  // read them unchecked (kernels_find_sequences, no check_indices).
  std::vector<std::int64_t> q_begin, k_begin;

  std::int64_t batch() const { return static_cast<std::int64_t>(q_begin.size()) - 1; }
  // Sequence b as a plain problem of batch 1.
  Problem sequence(std::int64_t b) const;
};

// Whether the GPU kernels find the sequences themselves (one launch of each
// kernel for the whole batch, Problem::sequences): CUDA tensors with
// cu_seqlens on their device. Otherwise the plain kernels run per sequence.
bool kernels_find_sequences(const TensorView& q, const IndexView& cu_seqlens_q,
                            const IndexView& cu_seqlens_k);

// The packed call as one problem whose batch entries are the sequences
// (kernels_find_sequences): batch, the longest lengths, the device offsets.
Problem sequences_problem(const VarlenProblem& vp, const IndexView& cu_seqlens_q,
                          const IndexView& cu_seqlens_k, std::int64_t max_seqlen_q,
                          std::int64_t max_seqlen_k);

struct KVCacheProblem {
  Problem base;  // batch, seq_q, heads, dims, dtype, scale, causal (seq_kv per sequence)
  bool paged = false;
  std::int64_t page_size = 0;  // paged: rows per page
  std::int64_t capacity = 0;   // rows a sequence's cache holds (seq_cache, or max_pages · page_size)
  std::int64_t seq_new = 0;    // rows appended per sequence
  bool quantized = false;      // e4m3 caches (KVCacheForwardArgs::k_scale)
  std::vector<std::int64_t> cache_lengths;  // [batch] before the append

  // Sequence b after the append, as a plain problem of batch 1.
  Problem sequence(std::int64_t b) const;
};

// The packed tensors of a varlen backward as the plain call's arguments
// (a problem of batch 1, or of the sequences with Problem::sequences).
BackwardArgs packed_backward_args(const VarlenBackwardArgs& args);

VarlenProblem validate_varlen_forward(const VarlenForwardArgs& args, const Options& options);
VarlenProblem validate_varlen_backward(const VarlenBackwardArgs& args, const Options& options);
KVCacheProblem validate_kvcache_forward(const KVCacheForwardArgs& args, const Options& options);

// An index array as the host reads it: the caller's host memory, or a copy
// of its device memory (in the order of `stream`: the call waits) into `copy`.
IndexView readable_on_host(const IndexView& t, std::vector<std::int32_t>& copy, void* stream);

}  // namespace flashgen::api
