// The CUDA backend: picks spec and tuning for a problem, gets the compiled
// kernel (memory cache, disk cache or NVRTC) and launches it on the caller's
// stream. Nothing is allocated for the forward beyond the caller's outputs.
#include "cuda/cuda_backend.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "codegen/generate.hpp"
#include "codegen/heuristics.hpp"
#include "codegen/kernel_families.hpp"
#include "cuda/kernel_args.hpp"
#include "cuda/query_head_packing.hpp"
#include "cuda/runtime/runtime.hpp"
#include "cuda/tensor_maps.hpp"
#include "cuda/user_mask.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen::cuda {
namespace {

// Everything needed to launch one generated kernel.
struct KernelChoice {
  KernelSpec spec;
  TuningParams tuning;
  const GeneratedKernel* generated = nullptr;  // owned by generated_kernel()'s memo
};

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

// The split-key forward's tuning: a forced forward tuning (ScopedTuningOverride,
// FLASHGEN_TUNING; may_split_keys lets only mma.sync ones through), else the
// heuristic's (the tables' rows time the forward over all keys, not this
// kernel).
TuningParams split_keys_tuning_for(const KernelSpec& spec, const Problem& p,
                                   std::size_t shared_limit) {
  if (tuning_overridden(KernelKind::forward))
    if (const std::optional<TuningParams> forced = lookup_tuning(spec, p, shared_limit))
      return *forced;
  return default_tuning(spec, shared_limit);
}

// Kernels that compute P from the scores (and so apply the score modifiers).
bool computes_probabilities(KernelKind kind) {
  return kind == KernelKind::forward || kind == KernelKind::backward_query ||
         kind == KernelKind::backward_key_value || kind == KernelKind::backward_atomic;
}

// `tma_readable`: whether TMA can read the tensors the kernel traverses
// (tma_can_read); where it cannot, a tuning whose producer copies by TMA
// runs the same shape without the producer (tuning_without_tma).
KernelChoice choose(KernelKind kind, const Problem& p, int vec, bool tma_readable, int ordinal,
                    bool split_keys = false) {
  KernelChoice c;
  c.spec.kind = kind;
  c.spec.split_keys = split_keys;
  c.spec.dtype = p.dtype;
  c.spec.dim_qk = static_cast<int>(p.dim_qk);
  c.spec.dim_v = static_cast<int>(p.dim_v);
  const MaskDiagonals diagonals = mask_diagonals(p);
  c.spec.causal = diagonals.past;
  c.spec.window = diagonals.before;
  c.spec.softcap = p.softcap > 0.0 && computes_probabilities(kind);
  // The sink joins the forward's denominator, or the combine's where the
  // keys are split (the shares' partial results hold none).
  c.spec.sinks = p.has_sinks() && (kind == KernelKind::forward_combine ||
                                   (kind == KernelKind::forward && !split_keys));
  c.spec.alibi = p.alibi_slopes.given() && computes_probabilities(kind);
  if (p.has_mask() && (computes_probabilities(kind) || kind == KernelKind::mask_blocks)) {
    c.spec.mask_mod = p.mask->expression.canonical();
    c.spec.mask_arrays = mask_arrays_of(p);
  }
  c.spec.vec = vec;
  const DeviceInfo& device = device_info(ordinal);
  c.spec.arch = device.arch();
  c.tuning = split_keys ? split_keys_tuning_for(c.spec, p, device.shared_per_block_optin)
                       : tuning_for(c.spec, p, device.shared_per_block_optin);
  if (!tma_readable) c.tuning = tuning_without_tma(c.spec, c.tuning, device.shared_per_block_optin);
  c.generated = &generated_kernel(c.spec, c.tuning);
  return c;
}

const CompiledKernel& compiled(const KernelChoice& c, int ordinal) {
  CompileRequest request;
  request.name = c.generated->name;
  request.source = c.generated->source;
  request.entry = c.generated->entry;
  request.arch = c.spec.arch;
  return get_kernel(request, ordinal, c.generated->shared_bytes);
}

// A kernel ready to launch: the choice and its loaded function.
struct ResolvedKernel {
  KernelChoice choice;
  const CompiledKernel* kernel = nullptr;  // owned by get_kernel's cache
};

// Everything choose() reads, as integers: two calls with equal signatures
// get the same kernel. `seq` picks the tuning table's row, `tables` counts
// table reloads (a reload may change the row).
struct Signature {
  KernelKind kind;
  DType dtype;
  int dim_qk, dim_v, vec, ordinal;
  bool causal, window, softcap, sinks, alibi, tma_readable, split_keys;
  std::int64_t seq;
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
          std::uint64_t(s.seq),
          s.tables, std::uint64_t(std::hash<std::string>()(s.mask))})
      h = (h ^ field) * 0x100000001b3ull;  // FNV-1a over the fields
    return h;
  }
};

// The kernel for a launch. A repeated call finds it by its signature (a few
// integers hashed): no tuning-table lookup, no key strings, no copy or hash
// of the source. Tuning overrides (the tuner, FLASHGEN_TUNING) bypass the
// memo, since they change between calls with the same signature.
ResolvedKernel resolve(KernelKind kind, const Problem& p, int vec, bool tma_readable,
                       int ordinal, bool split_keys = false) {
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
                      std::max(p.seq_q, p.seq_kv),
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

int forward_vec(const ForwardArgs& a) { return alignment_class({&a.q, &a.k, &a.v, &a.o}); }
bool forward_tma_readable(const ForwardArgs& a) { return tma_can_read(a.k) && tma_can_read(a.v); }

unsigned to_unsigned(std::int64_t x) { return static_cast<unsigned>(x); }

// Atomic only where the caller allows it and it is expected to be faster
// (never for fp32, whose backward is the deterministic one).
// FLASHGEN_BACKWARD=atomic or =two_kernel overrides the expectation (for
// benchmarks and tests of both variants); deterministic calls never use atomics.
bool use_atomic(const Problem& p, bool deterministic) {
  if (deterministic || p.dtype == DType::f32) return false;  // fp32: no atomic kernel
  const char* forced = std::getenv("FLASHGEN_BACKWARD");
  if (forced != nullptr && *forced != '\0') {
    if (std::strcmp(forced, "atomic") == 0) return true;
    if (std::strcmp(forced, "two_kernel") == 0) return false;
    throw Error(ErrorCode::invalid_argument,
                std::string("FLASHGEN_BACKWARD must be atomic or two_kernel; got '") + forced + "'");
  }
  return prefer_atomic_backward(static_cast<int>(p.dim_qk), static_cast<int>(p.dim_v));
}

// The backward as a list of launches. Two-kernel: backward_query (dQ and
// Dterm) then backward_key_value (dK, dV). Atomic: backward_prepare (Dterm,
// zeroed fp32 dQ), backward_atomic (dK, dV, dQ partials), convert_grad_q.
// With sinks, backward_sinks (their gradient, from Dterm) last.
std::vector<KernelKind> backward_kinds(const Problem& p, bool atomic) {
  std::vector<KernelKind> kinds =
      atomic ? std::vector<KernelKind>{KernelKind::backward_prepare, KernelKind::backward_atomic,
                                       KernelKind::convert_grad_q}
             : std::vector<KernelKind>{KernelKind::backward_query, KernelKind::backward_key_value};
  if (p.has_sinks()) kinds.push_back(KernelKind::backward_sinks);
  return kinds;
}

int backward_vec(const BackwardArgs& a) {
  return alignment_class({&a.q, &a.k, &a.v, &a.o, &a.grad_o, &a.grad_q, &a.grad_k, &a.grad_v});
}
// The query kernel traverses K and V, the key/value kernel Q and dO; one
// answer for both kernels (either of the four unreadable: neither uses TMA).
bool backward_tma_readable(const BackwardArgs& a) {
  return tma_can_read(a.q) && tma_can_read(a.k) && tma_can_read(a.v) && tma_can_read(a.grad_o);
}

// Workspace layout: Dterm [batch][heads_q][seq_q] fp32, then (atomic) the dQ
// accumulator [batch][heads_q][seq_q][dim_qk] fp32, each 256-byte aligned.
std::size_t dterm_bytes(const Problem& p) {
  return align256(sizeof(float) * static_cast<std::size_t>(p.batch * p.heads_q * p.seq_q));
}

// Stream-ordered scratch of one call, freed (in stream order) when the call
// returns or throws; or the caller's memory, which it leaves alone.
class CallScratch {
 public:
  CallScratch(std::size_t bytes, void* stream)
      : ptr_(allocate_async(bytes, stream)), stream_(stream), owned_(true) {}
  explicit CallScratch(DevicePtr callers) : ptr_(callers) {}
  CallScratch(const CallScratch&) = delete;
  CallScratch& operator=(const CallScratch&) = delete;
  ~CallScratch() {
    if (!owned_) return;
    try {
      free_async(ptr_, stream_);
    } catch (...) {  // the context is broken; the next call reports it
    }
  }
  DevicePtr get() const { return ptr_; }

 private:
  DevicePtr ptr_ = 0;
  void* stream_ = nullptr;
  bool owned_ = false;
};

// Grid of a kernel that owns row blocks of `rows` rows over `heads` heads.
LaunchShape block_grid(const KernelChoice& c, std::int64_t rows, std::int64_t heads,
                       std::int64_t batch) {
  LaunchShape shape;
  const bool row_kernel = is_row_kernel(c.spec.kind);
  const std::int64_t block_rows = row_kernel ? c.generated->threads / 32 : c.tuning.block_rows;
  const std::int64_t chunks = row_kernel ? 1 : head_chunks_of(c.spec, c.tuning);
  const std::int64_t row_blocks = (rows + block_rows - 1) / block_rows;
  // Chunks of the head dims (and the key/value kernel's dV and dK CTAs of
  // one key block) run along z.
  shape.grid[0] = to_unsigned(row_blocks);
  shape.grid[1] = to_unsigned(heads);
  shape.grid[2] = to_unsigned(batch * chunks);
  shape.block[0] = static_cast<unsigned>(c.generated->threads);
  shape.dynamic_shared_bytes = c.generated->shared_bytes;
  return shape;
}

// A grid with no CTA along some axis: nothing to launch (an empty grid is
// an invalid launch), as for problems without queries, keys or heads.
bool launches_nothing(const LaunchShape& shape) {
  return shape.grid[0] == 0 || shape.grid[1] == 0 || shape.grid[2] == 0;
}

// first, second: the two tensors the kernel traverses (K and V, or Q and dO
// over keys); kernels that copy them with TMA (GeneratedKernel::tensor_maps)
// take their tensor maps as the entry's second parameter.
void launch_resolved(const ResolvedKernel& r, const LaunchShape& shape,
                     flashgen_device::AttentionParams& params, void* stream,
                     const TensorView& first, const TensorView& second) {
  if (launches_nothing(shape)) return;
  const KernelChoice& c = r.choice;
  flashgen_device::TraversedTensorMaps maps;
  if (c.generated->tensor_maps)
    maps = traversed_tensor_maps(first, second, c.tuning.block_cols, c.generated->swizzle);
  void* kernel_args[] = {&params, &maps};
  launch(*r.kernel, shape, stream, kernel_args);
}

// A caller's workspace must hold the whole layout; none given is allowed here.
void check_workspace(const BackwardArgs& args, std::size_t workspace_bytes) {
  if (args.workspace != nullptr && args.workspace_bytes < workspace_bytes)
    throw Error(ErrorCode::invalid_argument,
                "workspace_bytes (" + std::to_string(args.workspace_bytes) +
                    ") must be at least backward_workspace_bytes() = " +
                    std::to_string(workspace_bytes));
}

// The problem and the forward's tensors (Q, K, V, O, LSE), which both
// ForwardArgs and BackwardArgs carry.
template <class Args>
flashgen_device::AttentionParams attention_params(const Problem& p, const Args& args) {
  flashgen_device::AttentionParams params = problem_params(p);
  params.q = tensor_arg(args.q);
  params.k = tensor_arg(args.k);
  params.v = tensor_arg(args.v);
  params.o = tensor_arg(args.o);
  params.lse = row_stats_arg(args.lse);
  return params;
}

// The arguments every backward kernel gets; Dterm (and, atomic, the dQ
// accumulator) live in `workspace`.
flashgen_device::AttentionParams backward_params(const Problem& p, const BackwardArgs& args,
                                                 DevicePtr workspace, bool atomic) {
  flashgen_device::AttentionParams params = attention_params(p, args);
  params.grad_o = tensor_arg(args.grad_o);
  params.grad_q = tensor_arg(args.grad_q);
  params.grad_k = tensor_arg(args.grad_k);
  params.grad_v = tensor_arg(args.grad_v);
  float* dterm = reinterpret_cast<float*>(workspace);
  params.dterm = {dterm, p.heads_q * p.seq_q, p.seq_q, 1};
  params.grad_q_accum = atomic ? reinterpret_cast<float*>(workspace + dterm_bytes(p)) : nullptr;
  params.grad_sinks = p.grad_sinks.data;
  params.grad_sinks_stride = p.grad_sinks.stride[0];
  return params;
}

// One launch of the backward: kernels over keys get a grid over key blocks
// of the key/value heads, backward_sinks a CTA per query head, the others a
// grid over query blocks of the query heads.
void launch_backward_kind(KernelKind kind, const Problem& p, const BackwardArgs& args,
                          flashgen_device::AttentionParams& params, void* stream) {
  const ResolvedKernel r =
      resolve(kind, p, backward_vec(args), backward_tma_readable(args), args.q.device);
  const bool over_keys =
      kind == KernelKind::backward_key_value || kind == KernelKind::backward_atomic;
  const LaunchShape shape = over_keys ? block_grid(r.choice, p.seq_kv, p.heads_kv, p.batch)
                            : kind == KernelKind::backward_sinks
                                ? block_grid(r.choice, 1, p.heads_q, 1)
                                : block_grid(r.choice, p.seq_q, p.heads_q, p.batch);
  if (over_keys)
    launch_resolved(r, shape, params, stream, args.q, args.grad_o);
  else
    launch_resolved(r, shape, params, stream, args.k, args.v);
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
// tuning: 1 (no split) where its query blocks alone give every SM a CTA.
int key_splits(const Problem& p, const KernelChoice& split, int ordinal) {
  const std::int64_t sms = device_info(ordinal).sm_count;
  const std::int64_t blocks = (p.seq_q + split.tuning.block_rows - 1) / split.tuning.block_rows *
                              p.heads_q * p.batch * head_chunks_of(split.spec, split.tuning);
  if (blocks >= sms) return 1;
  const std::int64_t wanted = (kSplitCtasPerSm * sms + blocks - 1) / blocks;
  const std::int64_t most = std::min(kMostKeyShares, p.seq_kv / kLeastKeysPerShare);
  return static_cast<int>(std::max<std::int64_t>(1, std::min(wanted, most)));
}

// How a forward runs: the call as the kernels see it (query heads packed as
// rows in decode) and the key shares of the split-key forward (0: the whole
// forward kernel). Sinks read by row are the combine's alone, so a packed
// call with sinks takes the split-key forward even with one share, and is
// not packed where that kernel does not serve it.
struct ForwardRoute {
  ForwardLaunch launch;
  int splits = 0;
};

ForwardRoute route_forward(const Problem& problem, const ForwardArgs& call) {
  ForwardRoute route{pack_query_heads(problem, call)};
  const Problem& p = route.launch.problem;
  const int vec = forward_vec(route.launch.args), ordinal = call.q.device;
  const bool sinks_by_row = route.launch.sinks_row_stride != 0;
  if (sinks_by_row && !split_kernel_serves(p, vec, ordinal)) return {{problem, call}};
  if (sinks_by_row || may_split_keys(p, vec, ordinal)) {
    const int splits = key_splits(p, choose(KernelKind::forward, p, vec, false, ordinal, true),
                                  ordinal);
    if (splits > 1 || sinks_by_row) route.splits = splits;
  }
  return route;
}

// The forward with each query block's keys shared by `splits` CTAs: their
// fp32 partial O and LSE go to stream-ordered scratch, which forward_combine
// merges into O and LSE in a fixed order (no atomics: the same bits on
// every run).
void forward_split_keys(const Problem& p, const ForwardArgs& args, int vec,
                        const ResolvedKernel& split, int splits,
                        flashgen_device::AttentionParams& params, void* stream) {
  const ResolvedKernel combine =
      resolve(KernelKind::forward_combine, p, vec, false, args.q.device);
  const std::size_t rows = static_cast<std::size_t>(splits * p.batch * p.heads_q * p.seq_q);
  const std::size_t lse_bytes = align256(sizeof(float) * rows);
  const CallScratch scratch(lse_bytes + sizeof(float) * rows * p.dim_v, stream);
  params.key_splits = splits;
  params.partial_lse = reinterpret_cast<float*>(scratch.get());
  params.partial_o = reinterpret_cast<float*>(scratch.get() + lse_bytes);
  LaunchShape shape = block_grid(split.choice, p.seq_q, p.heads_q, p.batch);
  shape.grid[0] *= static_cast<unsigned>(splits);  // the shares of a query block adjacent
  launch_resolved(split, shape, params, stream, args.k, args.v);
  launch_resolved(combine, block_grid(combine.choice, p.seq_q, p.heads_q, p.batch), params,
                  stream, args.k, args.v);
}

// A user mask's ranges of attended cells, computed by the mask_blocks kernel
// into `scratch` (user_mask_scratch_bytes), and its fields in `params`.
// Where the expression may fault, the call waits for that kernel and throws
// the first fault; otherwise nothing waits.
void prepare_user_mask(const Problem& p, int vec, int ordinal, DevicePtr scratch,
                       flashgen_device::AttentionParams& params, void* stream) {
  fill_bytes_async(scratch, 0, user_mask_scratch_bytes(p), stream);
  place_user_mask(p, scratch, params);
  const bool check = mask_may_fault(p);
  flashgen_device::AttentionParams blocks = params;
  if (check) blocks.mask_fault = reinterpret_cast<flashgen_device::MaskFault*>(scratch);
  const ResolvedKernel r = resolve(KernelKind::mask_blocks, p, vec, false, ordinal);
  const LaunchShape shape =
      mask_blocks_grid(p, static_cast<unsigned>(r.choice.generated->threads));
  if (launches_nothing(shape)) return;  // no pair to evaluate
  void* kernel_args[] = {&blocks};
  launch(*r.kernel, shape, stream, kernel_args);
  if (check) check_mask_faults(p, scratch, stream);
}

}  // namespace

TuningParams tuning_for(const KernelSpec& spec, const Problem& p, std::size_t shared_limit) {
  return lookup_tuning(spec, p, shared_limit).value_or(default_tuning(spec, shared_limit));
}

Availability availability() {
  try {
    if (device_count() < 1) return {false, "no CUDA device is visible"};
    nvrtc_version();
    return {true, ""};
  } catch (const Error& e) {
    return {false, e.what()};
  }
}

std::vector<std::string> forward_kernel_names(const Problem& problem, const ForwardArgs& call) {
  const ForwardRoute route = route_forward(problem, call);
  const Problem& p = route.launch.problem;
  const ForwardArgs& args = route.launch.args;
  const int vec = forward_vec(args), ordinal = args.q.device;
  std::vector<std::string> names;
  if (p.has_mask())
    names.push_back(choose(KernelKind::mask_blocks, p, vec, false, ordinal).generated->name);
  if (route.splits > 0) {
    names.push_back(choose(KernelKind::forward, p, vec, false, ordinal, true).generated->name);
    names.push_back(choose(KernelKind::forward_combine, p, vec, false, ordinal).generated->name);
    return names;
  }
  names.push_back(
      choose(KernelKind::forward, p, vec, forward_tma_readable(args), ordinal).generated->name);
  return names;
}

std::vector<std::string> backward_kernel_names(const Problem& p, const BackwardArgs& args,
                                               bool deterministic) {
  std::vector<std::string> names;
  const int vec = backward_vec(args);
  if (p.has_mask())
    names.push_back(choose(KernelKind::mask_blocks, p, vec, false, args.q.device).generated->name);
  for (KernelKind kind : backward_kinds(p, use_atomic(p, deterministic)))
    names.push_back(
        choose(kind, p, vec, backward_tma_readable(args), args.q.device).generated->name);
  return names;
}

std::size_t backward_workspace_bytes(const Problem& p, bool deterministic) {
  std::size_t bytes = dterm_bytes(p);
  if (use_atomic(p, deterministic))
    bytes += align256(sizeof(float) *
                      static_cast<std::size_t>(p.batch * p.heads_q * p.seq_q * p.dim_qk));
  return bytes;
}

void forward(const Problem& problem, const ForwardArgs& call, void* stream) {
  const ForwardRoute route = route_forward(problem, call);
  const Problem& p = route.launch.problem;
  const ForwardArgs& args = route.launch.args;
  const int vec = forward_vec(args), ordinal = args.q.device;
  flashgen_device::AttentionParams params = attention_params(p, args);
  params.sinks_row_stride = route.launch.sinks_row_stride;
  const CallScratch mask(p.has_mask() ? user_mask_scratch_bytes(p) : 0, stream);
  if (p.has_mask()) prepare_user_mask(p, vec, ordinal, mask.get(), params, stream);
  if (route.splits > 0) {
    const ResolvedKernel split = resolve(KernelKind::forward, p, vec, false, ordinal, true);
    return forward_split_keys(p, args, vec, split, route.splits, params, stream);
  }
  const ResolvedKernel r =
      resolve(KernelKind::forward, p, vec, forward_tma_readable(args), ordinal);
  launch_resolved(r, block_grid(r.choice, p.seq_q, p.heads_q, p.batch), params, stream, args.k,
                  args.v);
}

// The backward's kernels with `workspace` (Dterm, the atomic dQ accumulator)
// and a user mask's ranges.
void run_backward(const Problem& p, const BackwardArgs& args, DevicePtr workspace, bool atomic,
                  const std::vector<KernelKind>& kinds, void* stream) {
  flashgen_device::AttentionParams params = backward_params(p, args, workspace, atomic);
  const CallScratch mask(p.has_mask() ? user_mask_scratch_bytes(p) : 0, stream);
  if (p.has_mask())
    prepare_user_mask(p, backward_vec(args), args.q.device, mask.get(), params, stream);
  for (KernelKind kind : kinds) launch_backward_kind(kind, p, args, params, stream);
}

void backward(const Problem& p, const BackwardArgs& args, void* stream, bool deterministic) {
  const bool atomic = use_atomic(p, deterministic);
  // Scratch: the caller's workspace, or stream-ordered memory freed after.
  const std::size_t workspace_bytes = backward_workspace_bytes(p, deterministic);
  check_workspace(args, workspace_bytes);
  const CallScratch workspace =
      args.workspace != nullptr ? CallScratch(reinterpret_cast<DevicePtr>(args.workspace))
                                : CallScratch(workspace_bytes, stream);
  run_backward(p, args, workspace.get(), atomic, backward_kinds(p, atomic), stream);
}

void backward_stage(const Problem& p, const BackwardArgs& args, void* stream, KernelKind stage) {
  const std::vector<KernelKind> stages = {KernelKind::backward_query,
                                          KernelKind::backward_key_value};
  if (std::find(stages.begin(), stages.end(), stage) == stages.end())
    throw Error(ErrorCode::invalid_argument,
                "backward_stage runs a kernel of the deterministic backward (backward_query or "
                "backward_key_value)");
  // The stages hand Dterm over in the workspace, so it must outlive the call.
  if (args.workspace == nullptr)
    throw Error(ErrorCode::invalid_argument, "backward_stage needs the caller's workspace");
  check_workspace(args, backward_workspace_bytes(p, true));
  run_backward(p, args, reinterpret_cast<DevicePtr>(args.workspace), false, {stage}, stream);
}

}  // namespace flashgen::cuda
