// Checks every rule of the public API in a fixed order, so the first broken
// rule is the one reported: options, then each tensor on its own (dtype,
// memory, extents, strides, size, data), then agreement between tensors
// (dtype, memory, shapes, heads), then memory overlap of the outputs.
#include "api/validate.hpp"

#include "api/operands.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

namespace flashgen::api {
namespace {

// The shape rules both directions share; q, k, v, o define the problem.
void check_attention_shapes(const Operand& q, const Operand& k, const Operand& v,
                            const Operand& o) {
  check_extent(k, 0, q, 0);  // batch
  check_extent(k, 3, q, 3);  // dim_qk
  check_extent(v, 0, q, 0);  // batch
  check_extent(v, 1, k, 1);  // seq_kv
  check_extent(v, 2, k, 2);  // heads_kv
  check_extent(o, 0, q, 0);  // batch
  check_extent(o, 1, q, 1);  // seq_q
  check_extent(o, 2, q, 2);  // heads_q
  check_extent(o, 3, v, 3);  // dim_v
  // heads_kv = 0 divides only heads_q = 0 (a problem with no heads at all).
  if (k.shape[2] == 0 ? q.shape[2] != 0 : q.shape[2] % k.shape[2] != 0)
    fail("k.shape[2] (heads_kv = %lld) must divide q.shape[2] (heads_q = %lld)",
         static_cast<long long>(k.shape[2]), static_cast<long long>(q.shape[2]));
}

// lse is [batch, heads_q, seq_q] of the problem q defines.
void check_row_stats_shape(const Operand& lse, const Operand& q) {
  check_extent(lse, 0, q, 0);  // batch
  check_extent(lse, 1, q, 2);  // heads_q
  check_extent(lse, 2, q, 1);  // seq_q
}

Problem problem_of(const TensorView& q, const TensorView& k, const TensorView& v,
                   const Options& options) {
  Problem p;
  p.batch = q.shape[0];
  p.seq_q = q.shape[1];
  p.heads_q = q.shape[2];
  p.dim_qk = q.shape[3];
  p.seq_kv = k.shape[1];
  p.heads_kv = k.shape[2];
  p.dim_v = v.shape[3];
  p.dtype = q.dtype;
  p.scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(p.dim_qk)));
  p.causal = options.causal;
  copy_score_options(options, p);
  return p;
}

}  // namespace

bool elements_are_distinct(int rank, const std::int64_t* shape, const std::int64_t* stride) {
  // The axes of more than one element, by stride; on the stack, since every
  // call checks its outputs (views have at most 4 axes).
  constexpr int kMostAxes = 4;
  if (rank > kMostAxes) throw Error(ErrorCode::runtime, "elements_are_distinct: more than 4 axes");
  int axes[kMostAxes];
  int count = 0;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] == 0) return true;  // no elements at all
    if (shape[i] > 1) axes[count++] = i;
  }
  std::sort(axes, axes + count, [&](int a, int b) { return stride[a] < stride[b]; });
  std::int64_t reach = 0;  // largest offset the axes with smaller strides reach
  for (int n = 0; n < count; ++n) {
    const int axis = axes[n];
    if (stride[axis] <= reach) return false;
    reach += (shape[axis] - 1) * stride[axis];  // no overflow: checked by validation first
  }
  return true;
}

Problem validate_forward(const ForwardArgs& args, const Options& options,
                         std::int64_t sequences) {
  check_options(options);
  const std::pair<const char*, DType> dtypes[] = {
      {"q", args.q.dtype}, {"k", args.k.dtype}, {"v", args.v.dtype}, {"o", args.o.dtype}};
  for (const auto& [name, dtype] : dtypes) check_dtype(name, dtype);

  Operand q = operand_of("q", args.q, kQueryAxes, false);
  Operand k = operand_of("k", args.k, kKeyAxes, false);
  Operand v = operand_of("v", args.v, kValueAxes, false);
  Operand o = operand_of("o", args.o, kOutputAxes, true);
  // lse is optional in the forward: null data means "do not write it".
  const bool has_lse = args.lse.data != nullptr;
  Operand lse = operand_of("lse", args.lse, true);

  HeadVectors heads(options, false);
  MaskOperands masks(options);
  std::vector<Operand*> all = {&q, &k, &v, &o};
  if (has_lse) all.push_back(&lse);
  all.insert(all.end(), heads.given.begin(), heads.given.end());
  all.insert(all.end(), masks.given.begin(), masks.given.end());
  check_operands_agree(all, dtypes, options, q);

  check_attention_shapes(q, k, v, o);
  if (has_lse) check_row_stats_shape(lse, q);
  for (const Operand* op : heads.given) check_head_vector_shape(*op, q, sequences);

  check_outputs_do_not_overlap({all.begin(), all.end()});
  return problem_of(args.q, args.k, args.v, options);
}

Problem validate_backward(const BackwardArgs& args, const Options& options,
                          std::int64_t sequences) {
  check_options(options);
  const std::pair<const char*, DType> dtypes[] = {
      {"q", args.q.dtype},           {"k", args.k.dtype},
      {"v", args.v.dtype},           {"o", args.o.dtype},
      {"grad_o", args.grad_o.dtype}, {"grad_q", args.grad_q.dtype},
      {"grad_k", args.grad_k.dtype}, {"grad_v", args.grad_v.dtype}};
  for (const auto& [name, dtype] : dtypes) check_dtype(name, dtype);

  Operand q = operand_of("q", args.q, kQueryAxes, false);
  Operand k = operand_of("k", args.k, kKeyAxes, false);
  Operand v = operand_of("v", args.v, kValueAxes, false);
  Operand o = operand_of("o", args.o, kOutputAxes, false);
  Operand grad_o = operand_of("grad_o", args.grad_o, kOutputAxes, false);
  Operand lse = operand_of("lse", args.lse, false);  // required: the forward's statistics
  Operand grad_q = operand_of("grad_q", args.grad_q, kQueryAxes, true);
  Operand grad_k = operand_of("grad_k", args.grad_k, kKeyAxes, true);
  Operand grad_v = operand_of("grad_v", args.grad_v, kValueAxes, true);
  if (options.sinks.given() && !options.grad_sinks.given())
    fail("options.grad_sinks is not given: the backward with options.sinks writes the sinks' "
         "gradient there (fp32 [heads_q])");
  if (!options.sinks.given() && options.grad_sinks.given())
    fail("options.grad_sinks is given without options.sinks: it is the sinks' gradient");

  HeadVectors heads(options, true);
  MaskOperands masks(options);
  std::vector<Operand*> all = {&q, &k, &v, &o, &grad_o, &lse, &grad_q, &grad_k, &grad_v};
  all.insert(all.end(), heads.given.begin(), heads.given.end());
  all.insert(all.end(), masks.given.begin(), masks.given.end());
  check_operands_agree(all, dtypes, options, q);

  check_attention_shapes(q, k, v, o);
  check_same_shape(grad_o, o);
  check_row_stats_shape(lse, q);
  check_same_shape(grad_q, q);
  check_same_shape(grad_k, k);
  check_same_shape(grad_v, v);
  for (const Operand* op : heads.given) check_head_vector_shape(*op, q, sequences);

  // A caller-provided device workspace is scratch the kernels write.
  Operand workspace;  // rank 0: a plain byte range
  workspace.name = "workspace";
  workspace.output = true;
  const bool has_workspace = args.workspace != nullptr && args.workspace_bytes > 0 &&
                             q.memory == MemoryKind::cuda;
  if (has_workspace) {
    const auto begin = reinterpret_cast<std::uintptr_t>(args.workspace);
    std::uintptr_t end = 0;
    if (__builtin_add_overflow(begin, args.workspace_bytes, &end))
      fail("workspace + workspace_bytes (%zu) overflows the address space", args.workspace_bytes);
    workspace.range = {begin, end};
  }
  std::vector<const Operand*> checked(all.begin(), all.end());
  if (has_workspace) checked.push_back(&workspace);
  check_outputs_do_not_overlap(checked);
  return problem_of(args.q, args.k, args.v, options);
}

void validate_options(const Options& options) { check_options(options); }

Problem problem_from(const TensorView& q, const TensorView& k, const TensorView& v,
                     const Options& options) {
  return problem_of(q, k, v, options);
}

}  // namespace flashgen::api
