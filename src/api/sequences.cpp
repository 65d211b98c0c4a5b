// The varlen and KV-cache entry points (flashgen/sequences.hpp). Each
// validates, then runs the plain backend of the tensors' memory once per
// sequence over views of that sequence's rows (a sequence is a problem of
// batch 1), so the tiled algorithm is the plain call's; empty sequences get
// their zeros and -inf, as empty plain problems do. On the host a paged
// cache is gathered per sequence into a packed buffer first
// (cpu/kv_cache.hpp); on the GPU one forward reads the cache in place
// (Problem::kv_cache), and the varlen kernels find each sequence's rows
// themselves (Problem::sequences) where the offsets live on the GPU.
#include "flashgen/sequences.hpp"

#include <string>
#include <tuple>
#include <vector>

#include "api/plan.hpp"
#include "api/validate_sequences.hpp"
#include "cpu/kv_cache.hpp"

namespace flashgen {
namespace {

// Rows [row0, row0 + rows) of batch entry b, as a view of batch 1.
TensorView rows_of(const TensorView& t, std::int64_t b, std::int64_t row0, std::int64_t rows) {
  TensorView view = t;
  view.data = static_cast<unsigned char*>(t.data) +
              (b * t.stride[0] + row0 * t.stride[1]) * static_cast<std::int64_t>(size_of(t.dtype));
  view.shape[0] = 1;
  view.shape[1] = rows;
  return view;
}

RowStatsView rows_of(const RowStatsView& t, std::int64_t b, std::int64_t row0, std::int64_t rows) {
  if (t.data == nullptr) return t;
  RowStatsView view = t;
  view.data = t.data + b * t.stride[0] + row0 * t.stride[2];
  view.shape[0] = 1;
  view.shape[2] = rows;
  return view;
}

// dL/dsink, a sum over the sequences, is summed on the host from each
// one's share where the plain kernels run per sequence, so it wants host
// memory there (the kernels that find the sequences sum it themselves).
void refuse_sinks_gradient_on_cuda(const Problem& packed, const TensorView& q) {
  if (q.memory == MemoryKind::cuda && packed.has_sinks())
    throw Error(ErrorCode::unsupported,
                "backward_varlen: options.sinks with CUDA tensors needs cu_seqlens on the GPU "
                "(the kernels then sum dL/dsink over the sequences), or host (CPU) tensors");
}

}  // namespace

IndexView IndexView::vector(const std::int32_t* data, std::int64_t size, MemoryKind memory,
                            int device) {
  return matrix(data, size, 1, memory, device);
}

IndexView IndexView::matrix(const std::int32_t* data, std::int64_t rows, std::int64_t columns,
                            MemoryKind memory, int device) {
  IndexView view;
  view.data = data;
  view.shape[0] = rows, view.shape[1] = columns;
  view.stride[0] = columns, view.stride[1] = 1;
  view.memory = memory;
  view.device = device;
  return view;
}

TensorView packed_tokens(void* data, DType dtype, std::int64_t tokens, std::int64_t heads,
                         std::int64_t dim, MemoryKind memory, int device) {
  return TensorView::bshd(data, dtype, 1, tokens, heads, dim, memory, device);
}

// Sequence b's rows (its Problem p) of the tensors both directions take
// (q, k, v, o, lse) into `sequence`.
template <class PackedArgs, class SequenceArgs>
void slice_sequence(const PackedArgs& args, const api::VarlenProblem& vp, std::int64_t b,
                    const Problem& p, SequenceArgs& sequence) {
  const std::int64_t q0 = vp.q_begin[b], k0 = vp.k_begin[b];
  sequence.q = rows_of(args.q, 0, q0, p.seq_q);
  sequence.k = rows_of(args.k, 0, k0, p.seq_kv);
  sequence.v = rows_of(args.v, 0, k0, p.seq_kv);
  sequence.o = rows_of(args.o, 0, q0, p.seq_q);
  sequence.lse = rows_of(args.lse, 0, q0, p.seq_q);
}

void forward_varlen(const VarlenForwardArgs& args, const Options& options) {
  const api::VarlenProblem vp = api::validate_varlen_forward(args, options);
  if (api::kernels_find_sequences(args.q, args.cu_seqlens_q, args.cu_seqlens_k)) {
    const Problem p = api::sequences_problem(vp, args.cu_seqlens_q, args.cu_seqlens_k,
                                             args.max_seqlen_q, args.max_seqlen_k);
    return api::run_forward(Backend::cuda, p, {args.q, args.k, args.v, args.o, args.lse}, options);
  }
  for (std::int64_t b = 0; b < vp.batch(); ++b) {
    const Problem p = vp.sequence(b);
    ForwardArgs sequence;
    slice_sequence(args, vp, b, p, sequence);
    api::run_forward(api::backend_of(args.q), p, sequence, options);
  }
}

void backward_varlen(const VarlenBackwardArgs& args, const Options& options) {
  const api::VarlenProblem vp = api::validate_varlen_backward(args, options);
  if (api::kernels_find_sequences(args.q, args.cu_seqlens_q, args.cu_seqlens_k)) {
    const Problem p = api::sequences_problem(vp, args.cu_seqlens_q, args.cu_seqlens_k,
                                             args.max_seqlen_q, args.max_seqlen_k);
    return api::run_backward(Backend::cuda, p, api::packed_backward_args(args), options);
  }
  refuse_sinks_gradient_on_cuda(vp.packed, args.q);
  // With sinks, each sequence writes its share of dL/dsink here; the shares
  // are summed in sequence order (the same bits for any thread count).
  const std::int64_t heads = vp.packed.heads_q;
  std::vector<float> share(vp.packed.has_sinks() ? heads : 0);
  std::vector<double> sum(share.size(), 0.0);
  for (std::int64_t b = 0; b < vp.batch(); ++b) {
    Problem p = vp.sequence(b);
    if (p.has_sinks()) p.grad_sinks = HeadVectorView::heads(share.data(), heads);
    BackwardArgs sequence;
    slice_sequence(args, vp, b, p, sequence);
    const std::int64_t q0 = vp.q_begin[b], k0 = vp.k_begin[b];
    sequence.grad_o = rows_of(args.grad_o, 0, q0, p.seq_q);
    sequence.grad_q = rows_of(args.grad_q, 0, q0, p.seq_q);
    sequence.grad_k = rows_of(args.grad_k, 0, k0, p.seq_kv);
    sequence.grad_v = rows_of(args.grad_v, 0, k0, p.seq_kv);
    api::run_backward(api::backend_of(args.q), p, sequence, options);
    for (std::size_t h = 0; h < share.size(); ++h) sum[h] += share[h];
  }
  const HeadVectorView& grad_sinks = vp.packed.grad_sinks;
  for (std::size_t h = 0; h < sum.size(); ++h)
    grad_sinks.data[static_cast<std::int64_t>(h) * grad_sinks.stride[0]] =
        static_cast<float>(sum[h]);
}

// The call on CUDA tensors: one forward over every batch entry, whose
// kernels read the lengths and the block table, append and attend.
void forward_with_kvcache_on_gpu(const api::KVCacheProblem& kv, const KVCacheForwardArgs& args,
                                 const Options& options) {
  Problem p = kv.base;
  p.seq_kv = kv.capacity;
  KeyValueCache& cache = p.kv_cache;
  cache.lengths = args.cache_seqlens.data;
  cache.lengths_stride = args.cache_seqlens.stride[0];
  if (kv.seq_new > 0) {
    cache.k_new = args.k_new, cache.v_new = args.v_new;
    cache.appended = kv.seq_new;
  }
  if (kv.paged) {
    cache.block_table = args.block_table.data;
    cache.block_table_strides[0] = args.block_table.stride[0];
    cache.block_table_strides[1] = args.block_table.stride[1];
    cache.page_size = kv.page_size;
    cache.num_pages = args.k_cache.shape[0];
  }
  cache.fp8 = kv.quantized;
  cache.k_scale = args.k_scale, cache.v_scale = args.v_scale;
  // A dim stride other than 1 is read with the cache's (tile_copy.cuh).
  for (const auto& [name, appended, cached] :
       {std::tuple{"k_new", &args.k_new, &args.k_cache},
        std::tuple{"v_new", &args.v_new, &args.v_cache}})
    if (kv.seq_new > 0 && appended->shape[3] > 1 && appended->stride[3] != cached->stride[3])
      throw Error(ErrorCode::unsupported,
                  std::string("forward_with_kvcache on CUDA tensors: ") + name +
                      ".stride[3] must equal its cache's stride[3] (" +
                      std::to_string(cached->stride[3]) + ")");
  api::check_cuda_reachable(p, args.q);
  ForwardArgs call;
  call.q = args.q, call.k = args.k_cache, call.v = args.v_cache;
  call.o = args.o, call.lse = args.lse;
  api::run_forward(Backend::cuda, p, call, options);
}

void forward_with_kvcache(const KVCacheForwardArgs& args, const Options& options) {
  const api::KVCacheProblem kv = api::validate_kvcache_forward(args, options);
  if (args.q.memory == MemoryKind::cuda) return forward_with_kvcache_on_gpu(kv, args, options);
  const IndexView* table = kv.paged ? &args.block_table : nullptr;
  const cpu::CacheRows keys{args.k_cache, table, kv.page_size, &args.k_scale};
  const cpu::CacheRows values{args.v_cache, table, kv.page_size, &args.v_scale};
  if (kv.seq_new > 0) {
    cpu::append_rows(keys, args.k_new, kv.cache_lengths);
    cpu::append_rows(values, args.v_new, kv.cache_lengths);
  }
  std::vector<unsigned char> k_buffer, v_buffer;  // a paged sequence's rows, packed
  for (std::int64_t b = 0; b < kv.base.batch; ++b) {
    const Problem p = kv.sequence(b);
    ForwardArgs sequence;
    sequence.q = rows_of(args.q, b, 0, p.seq_q);
    sequence.o = rows_of(args.o, b, 0, p.seq_q);
    sequence.lse = rows_of(args.lse, b, 0, p.seq_q);
    if (kv.paged || kv.quantized) {  // an fp8 cache converted to q's dtype on the way
      sequence.k = cpu::gather_rows(keys, b, p.seq_kv, k_buffer, args.q.dtype);
      sequence.v = cpu::gather_rows(values, b, p.seq_kv, v_buffer, args.q.dtype);
    } else {
      sequence.k = rows_of(args.k_cache, b, 0, p.seq_kv);
      sequence.v = rows_of(args.v_cache, b, 0, p.seq_kv);
    }
    api::run_forward(api::backend_of(args.q), p, sequence, options);
  }
}

}  // namespace flashgen
