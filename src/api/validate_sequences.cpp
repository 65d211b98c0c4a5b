// Rules of the varlen and KV-cache calls, in a fixed order so the first
// broken rule is the one reported: options; each tensor and index array on
// its own; agreement (dtype, memory, shapes); overlap of outputs; then the
// index values (cu_seqlens, read back from device memory where they live
// there; cache_seqlens and block_table, host memory only for now).
#include "api/validate_sequences.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "api/operands.hpp"
#include "api/plan.hpp"
#include "api/validate.hpp"
#include "cuda/cuda_backend.hpp"

namespace flashgen::api {
namespace {

constexpr const char* kCumulativeAxes[2] = {"batch + 1", "1"};

// cu_seqlens: [batch + 1], 0 first, non-decreasing, last = the packed length.
std::vector<std::int64_t> read_cu_seqlens(const char* name, const IndexView& t,
                                          const char* packed, std::int64_t total) {
  std::vector<std::int64_t> begin(static_cast<std::size_t>(t.shape[0]));
  for (std::int64_t b = 0; b < t.shape[0]; ++b) begin[b] = t.at(b);
  if (begin[0] != 0) fail("%s[0] (%lld) must be 0: the first sequence starts at the first token",
                          name, static_cast<long long>(begin[0]));
  for (std::size_t b = 1; b < begin.size(); ++b) {
    if (begin[b] < begin[b - 1])
      fail("%s must be non-decreasing: %s[%zu] (%lld) < %s[%zu] (%lld)", name, name, b,
           static_cast<long long>(begin[b]), name, b - 1, static_cast<long long>(begin[b - 1]));
  }
  if (begin.back() != total)
    fail("%s[%zu] (%lld) must equal %s's length (%lld): the last entry is the total of the "
         "sequences' lengths",
         name, begin.size() - 1, static_cast<long long>(begin.back()), packed,
         static_cast<long long>(total));
  return begin;
}

void check_max_seqlen(const char* name, std::int64_t max_seqlen,
                      const std::vector<std::int64_t>& begin) {
  for (std::size_t b = 0; b + 1 < begin.size(); ++b) {
    const std::int64_t length = begin[b + 1] - begin[b];
    if (length > max_seqlen)
      fail("%s (%lld) must be >= every sequence's length: sequence %zu has %lld", name,
           static_cast<long long>(max_seqlen), b, static_cast<long long>(length));
  }
}

// Shared by the varlen forward and backward, after the packed tensors passed
// the plain call's rules (as a problem of batch 1).
VarlenProblem check_varlen(const Problem& packed, const TensorView& q,
                           const IndexView& cu_seqlens_q, const IndexView& cu_seqlens_k,
                           std::int64_t max_seqlen_q, std::int64_t max_seqlen_k,
                           bool check_indices, const Options& options) {
  if (packed.batch != 1)
    fail("q.shape[0] (batch = %lld) must be 1: varlen tensors hold the sequences' tokens one "
         "after another along axis 1 ([1, total_q, heads_q, dim_qk])",
         static_cast<long long>(packed.batch));
  Operand q_op = operand_of("q", q, kQueryAxes, false);
  Operand cu_q = operand_of("cu_seqlens_q", cu_seqlens_q, kCumulativeAxes);
  Operand cu_k = operand_of("cu_seqlens_k", cu_seqlens_k, kCumulativeAxes);
  for (Operand* op : {&cu_q, &cu_k}) {
    check_operand(*op);
    check_vector(*op);
    if (op->shape[0] < 1)
      fail("%s.shape[0] (%lld) must be >= 1: it holds batch + 1 offsets", op->name,
           static_cast<long long>(op->shape[0]));
    // Host offsets serve any tensors (and spare the read-back below);
    // device offsets live with the tensors.
    if (op->memory != MemoryKind::host) check_same_placement(*op, q_op);
  }
  check_extent(cu_k, 0, cu_q, 0);
  if (max_seqlen_q < 0 || max_seqlen_k < 0)
    fail("max_seqlen_q (%lld) and max_seqlen_k (%lld) must be >= 0",
         static_cast<long long>(max_seqlen_q), static_cast<long long>(max_seqlen_k));

  // Before device memory is read: the backend takes the options and runs here.
  if (q.memory == MemoryKind::cuda) check_cuda_reachable(packed, q);
  VarlenProblem out;
  out.packed = packed;
  // Offsets the kernels read are read back only when asked to be checked.
  if (kernels_find_sequences(q, cu_seqlens_q, cu_seqlens_k) && !check_indices)
    return out;
  std::vector<std::int32_t> copy;
  void* stream = options.stream;
  out.q_begin = read_cu_seqlens("cu_seqlens_q", readable_on_host(cu_seqlens_q, copy, stream), "q",
                                packed.seq_q);
  out.k_begin = read_cu_seqlens("cu_seqlens_k", readable_on_host(cu_seqlens_k, copy, stream), "k",
                                packed.seq_kv);
  check_max_seqlen("max_seqlen_q", max_seqlen_q, out.q_begin);
  check_max_seqlen("max_seqlen_k", max_seqlen_k, out.k_begin);
  return out;
}

// Sequences cu_seqlens_q gives (its shape checked later; 0 where it has no entry).
std::int64_t sequence_count(const IndexView& cu_seqlens_q) {
  return std::max<std::int64_t>(cu_seqlens_q.shape[0] - 1, 0);
}

}  // namespace

bool kernels_find_sequences(const TensorView& q, const IndexView& cu_seqlens_q,
                            const IndexView& cu_seqlens_k) {
  return q.memory == MemoryKind::cuda && cu_seqlens_q.memory == MemoryKind::cuda &&
         cu_seqlens_k.memory == MemoryKind::cuda;
}

Problem sequences_problem(const VarlenProblem& vp, const IndexView& cu_seqlens_q,
                          const IndexView& cu_seqlens_k, std::int64_t max_seqlen_q,
                          std::int64_t max_seqlen_k) {
  Problem p = vp.packed;
  p.batch = sequence_count(cu_seqlens_q);
  p.seq_q = max_seqlen_q;
  p.seq_kv = max_seqlen_k;
  PackedSequences& s = p.sequences;
  s.q_begin = cu_seqlens_q.data;
  s.k_begin = cu_seqlens_k.data;
  s.q_begin_stride = cu_seqlens_q.stride[0];
  s.k_begin_stride = cu_seqlens_k.stride[0];
  s.total_q = vp.packed.seq_q;
  s.total_kv = vp.packed.seq_kv;
  return p;
}

IndexView readable_on_host(const IndexView& t, std::vector<std::int32_t>& copy, void* stream) {
  if (t.memory != MemoryKind::cuda || t.shape[0] == 0) return t;
  const std::int64_t span = (t.shape[0] - 1) * t.stride[0] + (t.shape[1] - 1) * t.stride[1] + 1;
  copy.resize(static_cast<std::size_t>(span));
  cuda::copy_device_to_host(copy.data(), t.data, sizeof(std::int32_t) * copy.size(), stream);
  IndexView host = t;
  host.data = copy.data();
  host.memory = MemoryKind::host;
  return host;
}

Problem VarlenProblem::sequence(std::int64_t b) const {
  Problem p = packed;
  p.seq_q = q_begin[b + 1] - q_begin[b];
  p.seq_kv = k_begin[b + 1] - k_begin[b];
  p.mask_batch0 = b;  // the mask's b is the sequence
  p.alibi_slopes = slopes_of_row(packed.alibi_slopes, b);  // [sequences, heads_q]: its row
  return p;
}

Problem KVCacheProblem::sequence(std::int64_t b) const {
  Problem p = base;
  p.batch = 1;
  p.seq_kv = cache_lengths[b] + seq_new;
  p.mask_batch0 = b;  // the mask's b is the sequence, kv_idx its cache position
  p.alibi_slopes = slopes_of_row(base.alibi_slopes, b);
  return p;
}

VarlenProblem validate_varlen_forward(const VarlenForwardArgs& a, const Options& options) {
  const Problem packed =
      validate_forward({a.q, a.k, a.v, a.o, a.lse}, options, sequence_count(a.cu_seqlens_q));
  return check_varlen(packed, a.q, a.cu_seqlens_q, a.cu_seqlens_k, a.max_seqlen_q,
                      a.max_seqlen_k, a.check_indices, options);
}

BackwardArgs packed_backward_args(const VarlenBackwardArgs& a) {
  BackwardArgs packed;
  packed.q = a.q, packed.k = a.k, packed.v = a.v, packed.o = a.o;
  packed.grad_o = a.grad_o, packed.lse = a.lse;
  packed.grad_q = a.grad_q, packed.grad_k = a.grad_k, packed.grad_v = a.grad_v;
  return packed;
}

VarlenProblem validate_varlen_backward(const VarlenBackwardArgs& a, const Options& options) {
  const Problem packed =
      validate_backward(packed_backward_args(a), options, sequence_count(a.cu_seqlens_q));
  return check_varlen(packed, a.q, a.cu_seqlens_q, a.cu_seqlens_k, a.max_seqlen_q,
                      a.max_seqlen_k, a.check_indices, options);
}

}  // namespace flashgen::api
