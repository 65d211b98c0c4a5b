#include "check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/correctness_rule.hpp"
#include "cpu/reference.hpp"
#include "cuda/runtime/runtime.hpp"

namespace flashgen::cli {
namespace {

// The commands' slack, relative to max(1, max |ref|): tighter than the test
// suite's for f16/bf16 outputs (cpu::absolute_slack).
constexpr double kAbsoluteSlack = 2e-5;

OutputCheck judge(const char* name, const std::vector<double>& out,
                  const std::vector<double>& naive, const std::vector<double>& ref) {
  const cpu::RuleCheck rule = cpu::apply_correctness_rule(out, naive, ref, kAbsoluteSlack);
  OutputCheck c;
  c.name = name;
  c.error = rule.error;
  c.naive_error = rule.naive_error;
  c.bound = rule.bound;
  c.pass = rule.pass;
  return c;
}

// A host view of the first batches / heads of a downloaded packed BSHD tensor
// (the subset starts at element 0, so only the extents shrink).
TensorView subset_view(std::vector<unsigned char>& bytes, const Shape& s, std::int64_t batches,
                       std::int64_t seq, std::int64_t heads_total, std::int64_t heads,
                       std::int64_t dim) {
  TensorView t = TensorView::bshd(bytes.data(), s.dtype, s.batch, seq, heads_total, dim);
  t.shape[0] = batches;
  t.shape[2] = heads;
  return t;
}

// LSE of the subset, packed [batches, heads, seq_q].
std::vector<double> subset_lse(const std::vector<unsigned char>& bytes, const Shape& s,
                               std::int64_t batches, std::int64_t heads) {
  const auto* values = reinterpret_cast<const float*>(bytes.data());
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(batches * heads * s.seq_q));
  for (std::int64_t b = 0; b < batches; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < s.seq_q; ++i)
        out.push_back(values[(b * s.heads_q + h) * s.seq_q + i]);
  return out;
}

// "0" or "0..n-1".
std::string first_indices(std::int64_t count) {
  return count <= 1 ? "0" : "0.." + std::to_string(count - 1);
}

}  // namespace

bool CheckReport::pass() const {
  return std::all_of(outputs.begin(), outputs.end(), [](const OutputCheck& c) { return c.pass; });
}

std::string CheckReport::first_failure() const {
  for (const OutputCheck& c : outputs) {
    if (c.pass) continue;
    char text[160];
    std::snprintf(text, sizeof(text), "%s max|out-ref| %.3e > bound %.3e (%s)", c.name.c_str(),
                  c.error, c.bound, subset.c_str());
    return text;
  }
  return "";
}

CheckReport check_outputs(const Workload& w, const Problem& p, bool backward,
                          std::int64_t batches, std::int64_t kv_heads, int threads) {
  const Shape& s = w.shape();
  batches = std::min(batches, p.batch);
  kv_heads = std::min(kv_heads, p.heads_kv);
  const std::int64_t heads = kv_heads * p.group_size();

  Problem sub = p;
  sub.batch = batches;
  sub.heads_q = heads;
  sub.heads_kv = kv_heads;

  // The calls ran on the default stream: finish them before reading results.
  if (w.memory() == MemoryKind::cuda) cuda::synchronize();
  std::vector<unsigned char> q = w.q.download(), k = w.k.download(), v = w.v.download();
  std::vector<unsigned char> grad_o = w.grad_o.download(), o = w.o.download();
  const TensorView q_view = subset_view(q, s, batches, s.seq_q, s.heads_q, heads, s.dim_qk);
  const TensorView k_view = subset_view(k, s, batches, s.seq_kv, s.heads_kv, kv_heads, s.dim_qk);
  const TensorView v_view = subset_view(v, s, batches, s.seq_kv, s.heads_kv, kv_heads, s.dim_v);
  const TensorView grad_o_view = subset_view(grad_o, s, batches, s.seq_q, s.heads_q, heads, s.dim_v);
  const cpu::PackedInputs in =
      cpu::pack_inputs(q_view, k_view, v_view, backward ? &grad_o_view : nullptr);

  CheckReport report;
  report.subset = "batch " + first_indices(batches) + ", kv head " + first_indices(kv_heads) +
                  " (query heads " + first_indices(heads) + ")";

  cpu::ForwardResult ref_forward, naive_forward;
  cpu::BackwardResult ref_backward, naive_backward;
  if (backward) {
    ref_backward = cpu::reference_backward(sub, in, threads, &ref_forward);
    naive_backward = cpu::naive_same_dtype_backward(sub, in, threads, &naive_forward);
  } else {
    ref_forward = cpu::reference_forward(sub, in, threads);
    naive_forward = cpu::naive_same_dtype_forward(sub, in, threads);
  }

  const std::vector<double> out_o =
      cpu::to_packed_double(subset_view(o, s, batches, s.seq_q, s.heads_q, heads, s.dim_v));
  report.outputs.push_back(judge("O", out_o, naive_forward.o, ref_forward.o));
  report.outputs.push_back(
      judge("LSE", subset_lse(w.lse.download(), s, batches, heads), naive_forward.lse,
            ref_forward.lse));
  if (!backward) return report;

  std::vector<unsigned char> grad_q = w.grad_q.download(), grad_k = w.grad_k.download(),
                             grad_v = w.grad_v.download();
  report.outputs.push_back(judge(
      "dQ",
      cpu::to_packed_double(subset_view(grad_q, s, batches, s.seq_q, s.heads_q, heads, s.dim_qk)),
      naive_backward.grad_q, ref_backward.grad_q));
  report.outputs.push_back(judge("dK",
                                 cpu::to_packed_double(subset_view(grad_k, s, batches, s.seq_kv,
                                                                   s.heads_kv, kv_heads, s.dim_qk)),
                                 naive_backward.grad_k, ref_backward.grad_k));
  report.outputs.push_back(judge("dV",
                                 cpu::to_packed_double(subset_view(grad_v, s, batches, s.seq_kv,
                                                                   s.heads_kv, kv_heads, s.dim_v)),
                                 naive_backward.grad_v, ref_backward.grad_v));
  return report;
}

void print_check(const CheckReport& report, std::FILE* stream) {
  std::fprintf(stream, "check against the fp64 reference on %s:\n", report.subset.c_str());
  std::fprintf(stream, "  %-6s %14s %16s %12s  %s\n", "output", "max|out-ref|", "max|naive-ref|",
               "bound", "result");
  for (const OutputCheck& c : report.outputs)
    std::fprintf(stream, "  %-6s %14.3e %16.3e %12.3e  %s\n", c.name.c_str(), c.error,
                 c.naive_error, c.bound, c.pass ? "PASS" : "FAIL");
}

}  // namespace flashgen::cli
