// The C API: converts the flat structs to the C++ views and calls the C++
// API. No exception crosses this boundary; the message of a failure is kept
// per thread for fg_last_error().
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "cuda/cuda_backend.hpp"
#include "flashgen/flashgen.h"
#include "flashgen/flashgen.hpp"
#include "flashgen/sequences.hpp"

namespace flashgen {
namespace {

// The C enums are the C++ enums' values; a change to either breaks this file's build.
static_assert(FG_OK == static_cast<int>(ErrorCode::ok));
static_assert(FG_INVALID_ARGUMENT == static_cast<int>(ErrorCode::invalid_argument));
static_assert(FG_UNSUPPORTED == static_cast<int>(ErrorCode::unsupported));
static_assert(FG_RUNTIME == static_cast<int>(ErrorCode::runtime));
static_assert(FG_F16 == static_cast<int>(DType::f16) && FG_BF16 == static_cast<int>(DType::bf16) &&
              FG_F32 == static_cast<int>(DType::f32));
static_assert(FG_HOST == static_cast<int>(MemoryKind::host) &&
              FG_CUDA == static_cast<int>(MemoryKind::cuda));
static_assert(FG_BACKEND_AUTO == static_cast<int>(Backend::automatic) &&
              FG_BACKEND_CUDA == static_cast<int>(Backend::cuda) &&
              FG_BACKEND_CPU == static_cast<int>(Backend::cpu));
static_assert(FG_MASK_INT32 == static_cast<int>(MaskElement::int32) &&
              FG_MASK_FLOAT32 == static_cast<int>(MaskElement::float32));
static_assert(FG_CAUSAL_BOTTOM_RIGHT == static_cast<int>(CausalAlignment::bottom_right) &&
              FG_CAUSAL_TOP_LEFT == static_cast<int>(CausalAlignment::top_left));

thread_local std::string last_error;

int fail(int status, const std::string& message) {
  last_error = message;
  return status;
}

// Thrown inside this file for a NULL argument of a C function.
struct NullArgument {
  const char* name;
};

template <class T>
T& require(T* pointer, const char* name) {
  if (pointer == nullptr) throw NullArgument{name};
  return *pointer;
}

// The fields every view shares: data, memory, device, shape and strides.
// Enum values are copied as they are; validation reports values out of range by name.
template <class View, class CView>
View common_view_of(const CView& t) {
  View view;
  view.data = t.data;
  view.memory = static_cast<MemoryKind>(t.memory);
  view.device = t.device;
  constexpr int rank = sizeof(t.shape) / sizeof(t.shape[0]);
  static_assert(rank == sizeof(view.shape) / sizeof(view.shape[0]));
  for (int i = 0; i < rank; ++i) {
    view.shape[i] = t.shape[i];
    view.stride[i] = t.stride[i];
  }
  return view;
}

TensorView view_of(const fg_tensor& t) {
  TensorView view = common_view_of<TensorView>(t);
  view.dtype = static_cast<DType>(t.dtype);
  return view;
}

RowStatsView view_of(const fg_row_stats& t) { return common_view_of<RowStatsView>(t); }

HeadVectorView view_of(const fg_head_vector& t) {
  HeadVectorView view = common_view_of<HeadVectorView>(t);
  view.rank = t.rank;
  return view;
}

Options options_of(const fg_options& o) {
  Options options;
  if (o.has_scale != 0) options.scale = o.scale;
  options.causal = o.causal != 0;
  options.backend = static_cast<Backend>(o.backend);
  options.deterministic = o.deterministic != 0;
  options.stream = o.stream;
  options.cpu_threads = o.cpu_threads;
  options.window_left = o.window_left;
  options.window_right = o.window_right;
  options.softcap = o.softcap;
  options.causal_alignment = static_cast<CausalAlignment>(o.causal_alignment);
  options.alibi_slopes = view_of(o.alibi_slopes);
  options.sinks = view_of(o.sinks);
  options.grad_sinks = view_of(o.grad_sinks);
  if (o.mask_mod != nullptr) options.mask_mod = o.mask_mod;
  if (o.mask_tensor_count < 0)
    throw Error(ErrorCode::invalid_argument, "options->mask_tensor_count (" +
                                                 std::to_string(o.mask_tensor_count) +
                                                 ") must be >= 0");
  if (o.mask_tensor_count > 0 && o.mask_tensors == nullptr) throw NullArgument{"options->mask_tensors"};
  for (std::int64_t i = 0; i < o.mask_tensor_count; ++i) {
    const fg_mask_tensor& t = o.mask_tensors[i];
    MaskTensorView view;
    if (t.name == nullptr) throw NullArgument{"options->mask_tensors[i].name"};
    view.name = t.name;
    view.data = t.data;
    view.element = static_cast<MaskElement>(t.dtype);
    view.rank = t.rank;
    view.size = t.size;
    view.stride = t.stride;
    view.memory = static_cast<MemoryKind>(t.memory);
    view.device = t.device;
    options.mask_tensors.push_back(std::move(view));
  }
  return options;
}

BackwardArgs backward_args_of(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v,
                              const fg_tensor* o, const fg_tensor* grad_o, const fg_row_stats* lse,
                              const fg_tensor* grad_q, const fg_tensor* grad_k,
                              const fg_tensor* grad_v) {
  BackwardArgs args;
  args.q = view_of(require(q, "q"));
  args.k = view_of(require(k, "k"));
  args.v = view_of(require(v, "v"));
  args.o = view_of(require(o, "o"));
  args.grad_o = view_of(require(grad_o, "grad_o"));
  args.lse = view_of(require(lse, "lse"));
  args.grad_q = view_of(require(grad_q, "grad_q"));
  args.grad_k = view_of(require(grad_k, "grad_k"));
  args.grad_v = view_of(require(grad_v, "grad_v"));
  return args;
}

ForwardArgs forward_args_of(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v,
                            const fg_tensor* o, const fg_row_stats* lse) {
  ForwardArgs args;
  args.q = view_of(require(q, "q"));
  args.k = view_of(require(k, "k"));
  args.v = view_of(require(v, "v"));
  args.o = view_of(require(o, "o"));
  if (lse != nullptr) args.lse = view_of(*lse);  // NULL: the forward does not write it
  return args;
}

IndexView view_of(const fg_index& t) {
  IndexView view;
  view.data = t.data;
  view.memory = static_cast<MemoryKind>(t.memory);
  view.device = t.device;
  for (int i = 0; i < 2; ++i) {
    view.shape[i] = t.shape[i];
    view.stride[i] = t.stride[i];
  }
  return view;
}

// The packed sequences' offsets, the same fields in the forward's and the
// backward's varlen arguments.
template <class VarlenArgs>
void set_sequences(VarlenArgs& args, const fg_varlen& s) {
  args.cu_seqlens_q = view_of(require(s.cu_seqlens_q, "sequences->cu_seqlens_q"));
  args.cu_seqlens_k = view_of(require(s.cu_seqlens_k, "sequences->cu_seqlens_k"));
  args.max_seqlen_q = s.max_seqlen_q, args.max_seqlen_k = s.max_seqlen_k;
  args.check_indices = s.check_indices != 0;
}

// Runs `body` and turns every exception into a status and a message.
template <class Body>
int guarded(Body&& body) {
  try {
    body();
    return FG_OK;
  } catch (const NullArgument& null) {
    return fail(FG_INVALID_ARGUMENT, std::string(null.name) + " must not be NULL");
  } catch (const Error& error) {
    return fail(static_cast<int>(error.code()), error.what());
  } catch (const std::bad_alloc&) {
    return fail(FG_RUNTIME, "out of host memory");
  } catch (const std::exception& error) {
    return fail(FG_RUNTIME, error.what());
  } catch (...) {
    return fail(FG_RUNTIME, "unknown failure");
  }
}

}  // namespace
}  // namespace flashgen

using namespace flashgen;

extern "C" {

void fg_options_init(fg_options* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof(*options));
  const Options defaults;
  options->has_scale = 0;
  options->scale = 0.0;
  options->causal = defaults.causal ? 1 : 0;
  options->backend = static_cast<std::int32_t>(defaults.backend);
  options->deterministic = defaults.deterministic ? 1 : 0;
  options->stream = defaults.stream;
  options->cpu_threads = defaults.cpu_threads;
  options->window_left = defaults.window_left;
  options->window_right = defaults.window_right;
  options->softcap = defaults.softcap;
  options->causal_alignment = static_cast<std::int32_t>(defaults.causal_alignment);
  for (fg_head_vector* v : {&options->alibi_slopes, &options->sinks, &options->grad_sinks}) {
    v->data = nullptr;  // not given
    v->rank = 1;
  }
  options->mask_mod = nullptr;  // off
  options->mask_tensors = nullptr;
  options->mask_tensor_count = 0;
}

int fg_forward(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v, const fg_tensor* o,
               const fg_row_stats* lse, const fg_options* options) {
  return guarded([&] {
    const ForwardArgs args = forward_args_of(q, k, v, o, lse);
    forward(args, options_of(require(options, "options")));
  });
}

int fg_backward(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v, const fg_tensor* o,
                const fg_tensor* grad_o, const fg_row_stats* lse, const fg_tensor* grad_q,
                const fg_tensor* grad_k, const fg_tensor* grad_v, void* workspace,
                size_t workspace_bytes, const fg_options* options) {
  return guarded([&] {
    BackwardArgs args = backward_args_of(q, k, v, o, grad_o, lse, grad_q, grad_k, grad_v);
    args.workspace = workspace;
    args.workspace_bytes = workspace_bytes;
    backward(args, options_of(require(options, "options")));
  });
}

int fg_backward_workspace_bytes(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v,
                                const fg_tensor* o, const fg_tensor* grad_o,
                                const fg_row_stats* lse, const fg_tensor* grad_q,
                                const fg_tensor* grad_k, const fg_tensor* grad_v,
                                const fg_options* options, size_t* bytes) {
  return guarded([&] {
    std::size_t& result = require(bytes, "bytes");
    const BackwardArgs args = backward_args_of(q, k, v, o, grad_o, lse, grad_q, grad_k, grad_v);
    result = backward_workspace_bytes(args, options_of(require(options, "options")));
  });
}

int fg_supports_forward(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v,
                        const fg_tensor* o, const fg_row_stats* lse, const fg_options* options) {
  return guarded([&] {
    const ForwardArgs args = forward_args_of(q, k, v, o, lse);
    const Plan plan = plan_forward(args, options_of(require(options, "options")));
    if (!plan.ok) throw Error(plan.error, plan.reason);
  });
}

int fg_forward_varlen(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v,
                      const fg_tensor* o, const fg_row_stats* lse, const fg_varlen* sequences,
                      const fg_options* options) {
  return guarded([&] {
    const ForwardArgs plain = forward_args_of(q, k, v, o, lse);
    VarlenForwardArgs args;
    args.q = plain.q, args.k = plain.k, args.v = plain.v, args.o = plain.o, args.lse = plain.lse;
    set_sequences(args, require(sequences, "sequences"));
    forward_varlen(args, options_of(require(options, "options")));
  });
}

int fg_backward_varlen(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v,
                       const fg_tensor* o, const fg_tensor* grad_o, const fg_row_stats* lse,
                       const fg_tensor* grad_q, const fg_tensor* grad_k, const fg_tensor* grad_v,
                       const fg_varlen* sequences, const fg_options* options) {
  return guarded([&] {
    const BackwardArgs plain = backward_args_of(q, k, v, o, grad_o, lse, grad_q, grad_k, grad_v);
    VarlenBackwardArgs args;
    args.q = plain.q, args.k = plain.k, args.v = plain.v, args.o = plain.o;
    args.grad_o = plain.grad_o, args.lse = plain.lse;
    args.grad_q = plain.grad_q, args.grad_k = plain.grad_k, args.grad_v = plain.grad_v;
    set_sequences(args, require(sequences, "sequences"));
    backward_varlen(args, options_of(require(options, "options")));
  });
}

int fg_forward_with_kvcache(const fg_tensor* q, const fg_kvcache* cache, const fg_tensor* o,
                            const fg_row_stats* lse, const fg_options* options) {
  return guarded([&] {
    const fg_kvcache& c = require(cache, "cache");
    KVCacheForwardArgs args;
    args.q = view_of(require(q, "q"));
    args.k_cache = view_of(require(c.k_cache, "cache->k_cache"));
    args.v_cache = view_of(require(c.v_cache, "cache->v_cache"));
    args.cache_seqlens = view_of(require(c.cache_seqlens, "cache->cache_seqlens"));
    if (c.block_table != nullptr) args.block_table = view_of(*c.block_table);
    if (c.k_new != nullptr) args.k_new = view_of(*c.k_new);
    if (c.v_new != nullptr) args.v_new = view_of(*c.v_new);
    args.check_indices = c.check_indices != 0;
    args.k_scale = view_of(c.k_scale);
    args.v_scale = view_of(c.v_scale);
    args.o = view_of(require(o, "o"));
    if (lse != nullptr) args.lse = view_of(*lse);
    forward_with_kvcache(args, options_of(require(options, "options")));
  });
}

const char* fg_last_error(void) { return last_error.c_str(); }

const char* fg_version(void) { return flashgen::version(); }

int fg_cuda_available(void) {
  int available = 0;
  const int status = guarded([&] {
    const cuda::Availability a = cuda::availability();
    if (!a.ok) throw Error(ErrorCode::unsupported, a.reason);
    available = 1;
  });
  return status == FG_OK ? available : 0;
}

}  // extern "C"
