// The CUDA backend: the launches of a forward (forward_route.hpp) and of a
// backward, each kernel chosen and compiled by kernel_choice.hpp, on the
// caller's stream. Scratch (a split's partial results, a user mask's cells,
// the backward's workspace when the caller gives none) is stream-ordered
// memory freed in stream order.
#include "cuda/cuda_backend.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "codegen/heuristics.hpp"
#include "codegen/kernel_families.hpp"
#include "codegen/forward_schedule.hpp"
#include "cuda/forward_route.hpp"
#include "cuda/kernel_args.hpp"
#include "cuda/kernel_choice.hpp"
#include "cuda/launch_shapes.hpp"
#include "cuda/runtime/runtime.hpp"
#include "cuda/tensor_maps.hpp"
#include "cuda/user_mask.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen::cuda {
namespace {

// Atomic only where the caller allows it and it is expected to be faster
// (never for fp32, whose backward is the deterministic one, nor for packed
// sequences, whose kernels are the deterministic backward's).
// FLASHGEN_BACKWARD=atomic or =two_kernel overrides the expectation (for
// benchmarks and tests of both variants); deterministic calls never use atomics.
bool use_atomic(const Problem& p, bool deterministic) {
  if (deterministic || p.dtype == DType::f32 || p.sequences.given()) return false;
  const char* forced = std::getenv("FLASHGEN_BACKWARD");
  if (forced != nullptr && *forced != '\0') {
    if (std::strcmp(forced, "atomic") == 0) return true;
    if (std::strcmp(forced, "two_kernel") == 0) return false;
    throw Error(ErrorCode::invalid_argument,
                std::string("FLASHGEN_BACKWARD must be atomic or two_kernel; got '") + forced + "'");
  }
  return prefer_atomic_backward(static_cast<int>(p.dim_qk), static_cast<int>(p.dim_v));
}

int backward_vec(const BackwardArgs& a) {
  return alignment_class({&a.q, &a.k, &a.v, &a.o, &a.grad_o, &a.grad_q, &a.grad_k, &a.grad_v});
}
// Whether `kind` may copy its traversed tensors by TMA. On 16-byte rows one
// answer for both kernels (the query kernel traverses K and V, the
// key/value kernel Q and dO; either of the four unreadable: neither uses
// TMA). On rows of the other alignment classes each reads its own two
// through their token-row views, the key/value kernel only where each
// key/value head has one query head (it sums dK over the group's query
// heads, whose columns would start at different shifts).
bool backward_tma_readable(KernelKind kind, const Problem& p, const BackwardArgs& a, int vec) {
  if (p.sequences.given()) return false;  // varlen kernels copy with every thread
  if (vec == 8)
    return tma_can_read(a.q) && tma_can_read(a.k) && tma_can_read(a.v) && tma_can_read(a.grad_o);
  if (vec < 1) return false;
  if (kind == KernelKind::backward_query)
    return tma_can_read_token_rows(a.k) && tma_can_read_token_rows(a.v);
  return kind == KernelKind::backward_key_value && p.heads_q == p.heads_kv &&
         tma_can_read_token_rows(a.q) && tma_can_read_token_rows(a.grad_o);
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

// first, second: the two tensors the kernel traverses (K and V, or Q and dO
// over keys); kernels that copy them with TMA (GeneratedKernel::tensor_maps)
// take their tensor maps as the entry's second parameter: their token-row
// views where the rows are not 16-byte aligned (forward_tma_readable).
void launch_resolved(const ResolvedKernel& r, const LaunchShape& shape,
                     flashgen_device::AttentionParams& params, void* stream,
                     const TensorView& first, const TensorView& second) {
  if (launches_nothing(shape)) return;
  const KernelChoice& c = r.choice;
  flashgen_device::TraversedTensorMaps maps;
  if (c.generated->tensor_maps) {
    // Token rows: the tiles of a head (the forward's value chunks are copied
    // a slice at a time).
    const bool value_chunks =
        c.spec.kind == KernelKind::forward && head_chunks_of(c.spec, c.tuning) > 1;
    const TokenRowTiles tiles{
        {tile_width_qk(c.spec, true), value_chunks ? 0 : tile_width_v(c.spec, true)}};
    maps = traversed_tensor_maps(first, second, c.tuning.block_cols, c.generated->swizzle,
                                 c.spec.vec < 8 ? &tiles : nullptr);
  }
  void* kernel_args[] = {&params, &maps};
  if (c.tuning.persistent) {
    const LaunchShape walk = walking_shape(shape, params, device_info(first.device).sm_count);
    return launch(*r.kernel, walk, stream, kernel_args);
  }
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
  place_sequences(p, params);
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
  place_sequences(p, params);  // the gradients' batch strides too
  return params;
}

// One launch of the backward: kernels over keys get a grid over key blocks
// of the key/value heads, backward_sinks a CTA per query head, the others a
// grid over query blocks of the query heads.
void launch_backward_kind(KernelKind kind, const Problem& p, const BackwardArgs& args,
                          flashgen_device::AttentionParams& params, void* stream) {
  const int vec = backward_vec(args);
  const ResolvedKernel r =
      resolve(kind, p, vec, backward_tma_readable(kind, p, args, vec), args.q.device);
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
  // The shares of a query block adjacent.
  launch_resolved(split, block_grid(split.choice, p.seq_q, p.heads_q, p.batch, splits), params,
                  stream, args.k, args.v);
  const int parts = flashgen_device::combine_warps_per_row(splits);  // warps a row
  launch_resolved(combine, block_grid(combine.choice, p.seq_q * parts, p.heads_q, p.batch),
                  params, stream, args.k, args.v);
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

std::vector<KernelKind> backward_kinds(const Problem& p, bool atomic) {
  atomic = atomic && !p.sequences.given();  // packed sequences: the deterministic kernels
  std::vector<KernelKind> kinds =
      atomic ? std::vector<KernelKind>{KernelKind::backward_prepare, KernelKind::backward_atomic,
                                       KernelKind::convert_grad_q}
             : std::vector<KernelKind>{KernelKind::backward_query, KernelKind::backward_key_value};
  if (p.has_sinks()) kinds.push_back(KernelKind::backward_sinks);
  return kinds;
}

TuningParams tuning_for(const KernelSpec& spec, const Problem& p, std::size_t shared_limit) {
  const std::optional<TuningParams> row = lookup_tuning(spec, p, shared_limit);
  // A forced tuning runs as forced (with or without the walk and the turns).
  if (tuning_overridden(spec.kind)) return row.value_or(default_tuning(spec, shared_limit));
  const TuningParams t =
      row ? row_with_room_for_mask(spec, *row, shared_limit) : default_tuning(spec, shared_limit);
  return scheduled_as_run(spec, p, t, shared_limit);
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
  const int vec = route.vec, ordinal = args.q.device;
  std::vector<std::string> names;
  if (p.has_mask())
    names.push_back(choose(KernelKind::mask_blocks, p, vec, false, ordinal).generated->name);
  if (route.splits > 0) {
    names.push_back(choose(KernelKind::forward, p, vec, false, ordinal, true).generated->name);
    names.push_back(choose(KernelKind::forward_combine, p, vec, false, ordinal).generated->name);
    return names;
  }
  names.push_back(choose(KernelKind::forward, p, vec, forward_tma_readable(args, vec), ordinal)
                      .generated->name);
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
        choose(kind, p, vec, backward_tma_readable(kind, p, args, vec), args.q.device)
            .generated->name);
  return names;
}

std::size_t backward_workspace_bytes(const Problem& p, bool deterministic) {
  std::size_t bytes = dterm_bytes(p);
  if (use_atomic(p, deterministic))
    bytes += align256(sizeof(float) *
                      static_cast<std::size_t>(p.batch * p.heads_q * p.seq_q * p.dim_qk));
  return bytes;
}

void copy_device_to_host(void* host, const void* device, std::size_t bytes, void* stream) {
  copy_to_host(host, reinterpret_cast<DevicePtr>(device), bytes, stream);
}

void forward(const Problem& problem, const ForwardArgs& call, void* stream) {
  const ForwardRoute route = route_forward(problem, call);
  const Problem& p = route.launch.problem;
  const ForwardArgs& args = route.launch.args;
  const int vec = route.vec, ordinal = args.q.device;
  flashgen_device::AttentionParams params = attention_params(p, args);
  params.sinks_row_stride = route.launch.sinks_row_stride;
  const CallScratch mask(p.has_mask() ? user_mask_scratch_bytes(p) : 0, stream);
  if (p.has_mask()) prepare_user_mask(p, vec, ordinal, mask.get(), params, stream);
  if (route.splits > 0) {
    const ResolvedKernel split = resolve(KernelKind::forward, p, vec, false, ordinal, true);
    return forward_split_keys(p, args, vec, split, route.splits, params, stream);
  }
  const ResolvedKernel r =
      resolve(KernelKind::forward, p, vec, forward_tma_readable(args, vec), ordinal);
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
