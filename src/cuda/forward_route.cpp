#include "cuda/forward_route.hpp"

#include <algorithm>
#include <cstdint>

#include "codegen/generate.hpp"
#include "codegen/heuristics.hpp"
#include "cuda/kernel_args.hpp"
#include "cuda/kernel_choice.hpp"
#include "cuda/tensor_maps.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen::cuda {
namespace {

int forward_vec(const ForwardArgs& a) { return alignment_class({&a.q, &a.k, &a.v, &a.o}); }

// A KV cache's call also reads its appended rows.
int cached_forward_vec(const Problem& p, const ForwardArgs& a) {
  const KeyValueCache& c = p.kv_cache;
  if (c.appended == 0) return forward_vec(a);
  return alignment_class({&a.q, &a.k, &a.v, &a.o, &c.k_new, &c.v_new});
}

// Query rows up to which a forward may share its keys among CTAs: decode
// steps (with GQA, a group's query heads are the rows) and short speculative
// ones. Longer query blocks fill the GPU with query blocks of their own.
constexpr std::int64_t kMostSplitKeyRows = 64;
// CTAs per SM the shares aim at: enough copies in flight to stream K and V
// at the memory's speed. And keys a share traverses at the least, so that the
// partial results' traffic and the combine stay small beside K and V.
constexpr std::int64_t kSplitCtasPerSm = 4;
constexpr std::int64_t kLeastKeysPerShare = 256;
constexpr std::int64_t kMostKeyShares = 128;

// Whether the split-key kernel serves the problem: short query blocks of
// 16-bit tensors (the CUDA-core fp32 kernel has no split), and no forced
// wgmma forward (a test or an experiment asked for that kernel).
bool split_kernel_serves(const Problem& p, int vec, int ordinal) {
  if (p.dtype == DType::f32 || p.seq_q > kMostSplitKeyRows) return false;
  if (tuning_overridden(KernelKind::forward)) {
    const KernelChoice whole = choose(KernelKind::forward, p, vec, false, ordinal);
    if (whole.tuning.wgmma || whole.tuning.producer) return false;
  }
  return true;
}

// Whether the keys may be shared to fill the GPU: keys for two shares, and
// fewer query blocks than SMs even at the most rows a block may have.
bool may_split_keys(const Problem& p, int vec, int ordinal) {
  return p.seq_kv >= 2 * kLeastKeysPerShare && p.heads_q * p.batch < device_info(ordinal).sm_count &&
         split_kernel_serves(p, vec, ordinal);
}

// How many CTAs share each query block's keys under the split kernel's
// tuning: 1 (no split) where its query blocks alone give every SM a CTA,
// or, for a KV cache (which the split kernel reads whatever the shape),
// kSplitCtasPerSm CTAs. Its spec and tuning only (no source is generated on
// the call's path).
int key_splits(const Problem& p, int vec, int ordinal) {
  const DeviceInfo& device = device_info(ordinal);
  const KernelSpec split = spec_of(KernelKind::forward, p, vec, device.arch(), true);
  const TuningParams tuning = tuning_of(split, p, device.shared_per_block_optin);
  const std::int64_t sms = device.sm_count;
  const std::int64_t blocks = (p.seq_q + tuning.block_rows - 1) / tuning.block_rows * p.heads_q *
                              p.batch * head_chunks_of(split, tuning);
  if (blocks >= (p.kv_cache.given() ? kSplitCtasPerSm * sms : sms)) return 1;
  std::int64_t wanted = (kSplitCtasPerSm * sms + blocks - 1) / blocks;
  // No more CTAs than the SMs hold at once (by shared memory): a second,
  // partial wave would run on few SMs.
  const std::size_t per_sm = ctas_per_sm(shared_bytes(split, tuning), device.shared_per_sm);
  const std::int64_t resident = sms * static_cast<std::int64_t>(per_sm);
  while (wanted > 1 && blocks * wanted > resident) --wanted;
  const std::int64_t most = std::min(kMostKeyShares, p.seq_kv / kLeastKeysPerShare);
  return static_cast<int>(std::max<std::int64_t>(1, std::min(wanted, most)));
}

}  // namespace

ForwardRoute route_forward(const Problem& problem, const ForwardArgs& call) {
  // Packed sequences run the whole forward over each sequence's own blocks.
  if (problem.sequences.given()) return {{problem, call}, 0, forward_vec(call)};
  ForwardRoute route{pack_query_heads(problem, call)};
  if (problem.kv_cache.given()) {
    // The split-key kernel alone reads a KV cache, with one share at least.
    route.vec = cached_forward_vec(route.launch.problem, route.launch.args);
    route.splits = key_splits(route.launch.problem, route.vec, call.q.device);
    return route;
  }
  const Problem& p = route.launch.problem;
  const int vec = forward_vec(route.launch.args), ordinal = call.q.device;
  route.vec = vec;
  const bool sinks_by_row = route.launch.sinks_row_stride != 0;
  if (sinks_by_row && !split_kernel_serves(p, vec, ordinal))
    return {{problem, call}, 0, forward_vec(call)};
  if (sinks_by_row || may_split_keys(p, vec, ordinal)) {
    const int splits = key_splits(p, vec, ordinal);
    if (splits > 1 || sinks_by_row) route.splits = splits;
  }
  return route;
}

bool forward_tma_readable(const ForwardArgs& a, int vec) {
  if (vec == 8) return tma_can_read(a.k) && tma_can_read(a.v);
  return vec >= 1 && tma_can_read_token_rows(a.k) && tma_can_read_token_rows(a.v);
}

}  // namespace flashgen::cuda
