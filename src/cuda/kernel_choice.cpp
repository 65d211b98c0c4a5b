#include "cuda/kernel_choice.hpp"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "codegen/heuristics.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/kernel_args.hpp"
#include "cuda/user_mask.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen::cuda {
namespace {

// generate() once per (spec, tuning) in the process: the source does not
// change between calls, and building it costs microseconds per kernel on
// every call otherwise. Entries live as long as the process (kernels are few).
const GeneratedKernel& generated_kernel(const KernelSpec& spec, const TuningParams& tuning) {
  static std::mutex mutex;
  static auto* kernels = new std::unordered_map<std::string, GeneratedKernel>();  // leaked: calls may run at exit
  // The mask's whole text: its name holds only a hash of it.
  std::string key = spec.to_string() + " | " + tuning.to_string() + " | " + spec.mask_arrays +
                    " | " + spec.mask_mod;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = kernels->find(key);
    if (it != kernels->end()) return it->second;
  }
  GeneratedKernel g = generate(spec, tuning);
  std::lock_guard<std::mutex> lock(mutex);
  return kernels->emplace(std::move(key), std::move(g)).first->second;  // node-based: stable
}

// Query rows up to which the split-key forward's CTA is one 16-row tile
// whose warps split each key block (split=keys): decode's rows are a GQA
// group's query heads, a few, and warps of their own rows would each repeat
// the block's GEMMs over rows that hold nothing. Past them (a KV cache's
// chunked prefill, hundreds of query rows) four warps of 16 rows each, so
// that each key/value block is read once per 64 rows.
constexpr std::int64_t kSplitKeysWarpRows = 32;
// An fp8 cache's chunked prefill: 32-key blocks, whose converted tiles and
// staging leave room for more CTAs (docs/decisions.md).
constexpr int kFp8KeyBlock = 32;

// Shapes of the split=keys CTA (keys per block, warps, stages of the ring),
// the first of which three CTAs fit an SM's shared memory: a CTA waits on
// its copies' latency (a KV cache's rows found through its block table
// before they are copied, the staging of an fp8 cache's bytes), which only
// other CTAs hide. Decode on an H100 (16k keys, B = 16, GQA 32/8, D = 128;
// ms; docs/decisions.md): plain / 16-row pages / fp8 cache, one warp over 64
// keys (the former shape) 0.387 / 0.421 / 0.795 (four warps of their own
// rows over 32 keys); two over 32 keys in 3 stages 0.369 / 0.389 / -; four
// over 64 keys in 2 stages 0.373 / 0.467 / 0.487; four over 128 keys in 2
// stages (one CTA an SM) 0.352 / 1.116 / 0.945. cuDNN 0.339 plain. Measured
// with the CTA's threads copying together, before each warp copied its own
// keys. An fp8 cache read into the fragments (rows 8-byte aligned; ms,
// contiguous / 16-row pages / 128k keys in 64-row pages): four warps over
// 64 keys in 3 stages 0.226 / 0.352 / 0.182, in 2 stages 0.274 / 0.418 /
// 0.246, over 128 keys in 2 stages 0.247 / 0.421 / 0.214 (docs/decisions.md).
struct KeySplitShape {
  int cols, warps, stages;
};
constexpr KeySplitShape kKeySplitShapes[] = {{32, 2, 3}, {32, 2, 2}, {32, 2, 0}};
constexpr KeySplitShape kFp8KeySplitShapes[] = {{64, 4, 3}, {64, 4, 2}, {32, 2, 2}, {32, 2, 0}};
constexpr std::size_t kKeySplitCtasPerSm = 3;

// The split-key forward's tuning: a forced forward tuning (ScopedTuningOverride,
// FLASHGEN_TUNING; may_split_keys lets only mma.sync ones through), else the
// heuristic's (the tables' rows time the forward over all keys, not this
// kernel) shaped for the query rows.
TuningParams split_keys_tuning_for(const KernelSpec& spec, const Problem& p,
                                   std::size_t shared_limit) {
  if (tuning_overridden(KernelKind::forward))
    if (const std::optional<TuningParams> forced = lookup_tuning(spec, p, shared_limit))
      return *forced;
  const TuningParams t = default_tuning(spec, shared_limit);
  if (p.seq_q <= kSplitKeysWarpRows) {
    const auto try_shapes = [&](const auto& shapes) {
      for (const KeySplitShape& shape : shapes) {
        TuningParams keys = t;
        keys.block_cols = shape.cols;
        keys.warps = shape.warps;
        keys.stages = shape.stages;
        keys.split = WarpgroupSplit::keys;
        // shared_limit, an SM's less one reserve, stands for the SM's.
        const std::size_t sm = shared_limit + kSharedReservedPerCta;
        if (ctas_per_sm(shared_bytes(spec, keys), sm) >= kKeySplitCtasPerSm) return keys;
      }
      return t;
    };
    return spec.fp8_cache ? try_shapes(kFp8KeySplitShapes) : try_shapes(kKeySplitShapes);
  }
  TuningParams wide = t;
  wide.block_rows = 4 * t.block_rows;
  wide.warps = 4 * t.warps;
  if (spec.fp8_cache) wide.block_cols = std::min(wide.block_cols, kFp8KeyBlock);
  return shared_bytes(spec, wide) <= shared_limit ? wide : t;
}

// Where the kernel reads K and V: a KV cache only the split-key forward reads.
KeyCache key_cache_of(KernelKind kind, const Problem& p, bool split_keys) {
  if (!p.kv_cache.given() || kind != KernelKind::forward || !split_keys) return KeyCache::none;
  return p.kv_cache.paged() ? KeyCache::paged : KeyCache::contiguous;
}

// Kernels that compute P from the scores (and so apply the score modifiers).
bool computes_probabilities(KernelKind kind) {
  return kind == KernelKind::forward || kind == KernelKind::backward_query ||
         kind == KernelKind::backward_key_value || kind == KernelKind::backward_atomic;
}

const CompiledKernel& compiled(const KernelChoice& c, int ordinal) {
  CompileRequest request;
  request.name = c.generated->name;
  request.source = c.generated->source;
  request.entry = c.generated->entry;
  request.arch = c.spec.arch;
  return get_kernel(request, ordinal, c.generated->shared_bytes);
}

// Everything choose() reads, as integers: two calls with equal signatures
// get the same kernel. `seq` picks the tuning table's row and, with the
// window's edges, whether the forward walks its tiles (walking_where_faster);
// `tables` counts table reloads (a reload may change the row).
struct Signature {
  KernelKind kind;
  DType dtype;
  int dim_qk, dim_v, vec, ordinal;
  bool causal, window, softcap, sinks, alibi, tma_readable, split_keys;
  KeyCache cache;
  bool fp8_cache, varlen;
  std::int64_t seq, window_left, window_right;
  std::uint64_t tables;
  std::string mask;  // the user mask's arrays and canonical text ("" without one)
  bool operator==(const Signature&) const = default;
};

struct SignatureHash {
  std::size_t operator()(const Signature& s) const {
    std::size_t h = 0;
    for (std::uint64_t field :
         {std::uint64_t(s.kind), std::uint64_t(s.dtype), std::uint64_t(s.dim_qk),
          std::uint64_t(s.dim_v), std::uint64_t(s.vec), std::uint64_t(s.ordinal),
          std::uint64_t(s.alibi) << 6 | std::uint64_t(s.sinks) << 5 |
              std::uint64_t(s.softcap) << 4 |
              std::uint64_t(s.window) << 3 | std::uint64_t(s.split_keys) << 2 |
              std::uint64_t(s.causal) << 1 | std::uint64_t(s.tma_readable),
          std::uint64_t(s.seq), std::uint64_t(s.window_left), std::uint64_t(s.window_right),
          std::uint64_t(s.cache) << 2 | std::uint64_t(s.fp8_cache) << 1 | std::uint64_t(s.varlen),
          s.tables, std::uint64_t(std::hash<std::string>()(s.mask))})
      h = (h ^ field) * 0x100000001b3ull;  // FNV-1a over the fields
    return h;
  }
};

}  // namespace

KernelSpec spec_of(KernelKind kind, const Problem& p, int vec, const std::string& arch,
                   bool split_keys) {
  KernelSpec spec;
  spec.kind = kind;
  spec.split_keys = split_keys;
  spec.dtype = p.dtype;
  spec.dim_qk = static_cast<int>(p.dim_qk);
  spec.dim_v = static_cast<int>(p.dim_v);
  const MaskDiagonals diagonals = mask_diagonals(p);
  spec.causal = diagonals.past;
  spec.window = diagonals.before;
  spec.softcap = p.softcap > 0.0 && computes_probabilities(kind);
  // The sink joins the forward's denominator, or the combine's where the
  // keys are split (the shares' partial results hold none).
  spec.sinks = p.has_sinks() && (kind == KernelKind::forward_combine ||
                                 (kind == KernelKind::forward && !split_keys));
  spec.alibi = p.alibi_slopes.given() && computes_probabilities(kind);
  if (p.has_mask() && (computes_probabilities(kind) || kind == KernelKind::mask_blocks)) {
    spec.mask_mod = p.mask->expression.canonical();
    spec.mask_arrays = mask_arrays_of(p);
  }
  spec.cache = key_cache_of(kind, p, split_keys);
  spec.fp8_cache = spec.cache != KeyCache::none && p.kv_cache.fp8;
  spec.varlen = p.sequences.given() && (kind == KernelKind::forward ||
                                        kind == KernelKind::backward_query ||
                                        kind == KernelKind::backward_key_value);
  spec.vec = vec;
  spec.arch = arch;
  return spec;
}

TuningParams tuning_of(const KernelSpec& spec, const Problem& p, std::size_t shared_limit) {
  if (spec.split_keys) return split_keys_tuning_for(spec, p, shared_limit);
  TuningParams t = tuning_for(spec, p, shared_limit);
  if (!spec.varlen) return t;
  // Packed sequences (KernelSpec::varlen): a CTA per tile of its sequence
  // (a table row's walk dropped); the backward kernels copy with every thread.
  t.persistent = false;
  return spec.kind == KernelKind::forward ? t : tuning_without_tma(spec, t, shared_limit);
}

KernelChoice choose(KernelKind kind, const Problem& p, int vec, bool tma_readable, int ordinal,
                    bool split_keys) {
  const DeviceInfo& device = device_info(ordinal);
  KernelChoice c;
  c.spec = spec_of(kind, p, vec, device.arch(), split_keys);
  c.tuning = tuning_of(c.spec, p, device.shared_per_block_optin);
  if (!tma_readable) c.tuning = tuning_without_tma(c.spec, c.tuning, device.shared_per_block_optin);
  c.generated = &generated_kernel(c.spec, c.tuning);
  return c;
}

ResolvedKernel resolve(KernelKind kind, const Problem& p, int vec, bool tma_readable,
                       int ordinal, bool split_keys) {
  const auto build = [&] {
    ResolvedKernel r;
    r.choice = choose(kind, p, vec, tma_readable, ordinal, split_keys);
    r.kernel = &compiled(r.choice, ordinal);
    return r;
  };
  if (tuning_overridden(kind)) return build();
  const MaskDiagonals diagonals = mask_diagonals(p);
  const Signature key{kind,
                      p.dtype,
                      static_cast<int>(p.dim_qk),
                      static_cast<int>(p.dim_v),
                      vec,
                      ordinal,
                      diagonals.past,
                      diagonals.before,
                      p.softcap > 0.0,
                      p.has_sinks(),
                      p.alibi_slopes.given(),
                      tma_readable,
                      split_keys,
                      key_cache_of(kind, p, split_keys),
                      p.kv_cache.fp8,
                      p.sequences.given(),
                      std::max(p.seq_q, p.seq_kv),
                      p.window_left,
                      p.window_right,
                      tuning_tables_generation(),
                      p.has_mask() ? mask_arrays_of(p) + "|" + p.mask->expression.canonical()
                                   : std::string()};
  static std::mutex mutex;
  static auto* memo = new std::unordered_map<Signature, ResolvedKernel, SignatureHash>();  // leaked: calls may run at exit
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = memo->find(key);
    if (it != memo->end()) return it->second;
  }
  ResolvedKernel r = build();  // outside the lock: a first call may compile for seconds
  std::lock_guard<std::mutex> lock(mutex);
  return memo->emplace(key, r).first->second;
}


}  // namespace flashgen::cuda
