#include "attention_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cpu/correctness_rule.hpp"
#include "cpu/reference.hpp"
#include "device_storage.hpp"
#include "score_options.hpp"
#include "test_tensor.hpp"

namespace flashgen::testing {
namespace {

// Collects every problem found, so one failure message tells all.
class Findings {
 public:
  explicit Findings(std::string name) : name_(std::move(name)) {}
  void add(const std::string& what) { problems_.push_back(what); }
  ::testing::AssertionResult result() const {
    if (problems_.empty()) return ::testing::AssertionSuccess();
    auto failure = ::testing::AssertionFailure() << name_ << ":";
    for (const std::string& p : problems_) failure << "\n  " << p;
    return failure;
  }

 private:
  std::string name_;
  std::vector<std::string> problems_;
};

bool report_requested() {
  const char* value = std::getenv("FLASHGEN_TEST_REPORT");
  return value != nullptr && *value != '\0' && *value != '0';
}

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", x);
  return text;
}

struct Deviation {
  double max = 0.0;         // max |x - ref| (inf when an infinity mismatches)
  std::int64_t worst = -1;  // where
  std::int64_t nans = 0, first_nan = -1;
};

Deviation deviation(const std::vector<double>& x, const std::vector<double>& ref) {
  Deviation d;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      if (d.nans++ == 0) d.first_nan = static_cast<std::int64_t>(i);
      continue;
    }
    // Equal infinities (LSE = -inf of a row that sees no key) match exactly.
    const double e = x[i] == ref[i] ? 0.0 : std::abs(x[i] - ref[i]);
    if (e > d.max || d.worst < 0) d.max = e, d.worst = static_cast<std::int64_t>(i);
  }
  return d;
}

}  // namespace

std::string tolerance_violation(const char* name, const TestTensor& tensor,
                                const std::vector<double>& out, const std::vector<double>& ref,
                                const std::vector<double>& naive, DType precision) {
  const double atol = absolute_slack(precision) * cpu::slack_scale(ref);
  const Deviation got = deviation(out, ref);
  const Deviation yardstick = deviation(naive, ref);
  const double allowed = cpu::kNaiveErrorFactor * yardstick.max + atol;
  if (report_requested()) {
    std::printf("    %-6s max|out-ref| %-10s naive %-10s atol %-10s ratio %.3g\n", name,
                number(got.max).c_str(), number(yardstick.max).c_str(), number(atol).c_str(),
                got.max / allowed);
  }
  std::string problems;
  auto add = [&](const std::string& p) { problems += (problems.empty() ? "" : "\n  ") + p; };
  if (got.nans > 0) {
    add(std::string(name) + ": " + std::to_string(got.nans) + " NaN (first at " +
        tensor.index_text(got.first_nan) + ")");
  }
  if (yardstick.nans > 0) {
    add(std::string(name) + ": the naive same-dtype computation gave NaN; the case is outside "
        "what the rule can judge");
  }
  if (!(got.max <= allowed)) {
    const std::size_t at = static_cast<std::size_t>(got.worst);
    add(std::string(name) + ": max|out - ref| = " + number(got.max) + " at " +
        tensor.index_text(got.worst) + " (out " + number(out[at]) + ", ref " + number(ref[at]) +
        ") exceeds 2 * " + number(yardstick.max) + " (naive same-dtype error) + " +
        number(atol) + " (atol)");
  }
  return problems;
}

namespace {

void compare(Findings& findings, const char* name, const TestTensor& tensor,
             const std::vector<double>& out, const std::vector<double>& ref,
             const std::vector<double>& naive, DType precision) {
  const std::string problems = tolerance_violation(name, tensor, out, ref, naive, precision);
  if (!problems.empty()) findings.add(problems);
}

void expect_unchanged(Findings& findings, const char* name, const TestTensor& input) {
  const std::string problem = input.check_unchanged(input.download());
  if (!problem.empty()) findings.add(std::string("input ") + name + " " + problem);
}

// Downloads an output and checks what holds whatever its values: every
// element written, nothing written beside it.
std::vector<unsigned char> expect_written(Findings& findings, const char* name,
                                          const TestTensor& output) {
  std::vector<unsigned char> now = output.download();
  std::string problem = output.check_all_written(now);
  if (!problem.empty()) findings.add(std::string("output ") + name + ": " + problem);
  problem = output.check_outside_unchanged(now);
  if (!problem.empty()) findings.add(std::string("output ") + name + " " + problem);
  return now;
}

// The inputs q, k, v (and grad_o) of a case, filled with its fixed values.
struct Inputs {
  Inputs(const Case& c, MemoryKind memory)
      : q(memory, c.dtype, c.batch, c.seq_q, c.heads_q, c.dim_qk, c.layout, c.placement),
        k(memory, c.dtype, c.batch, c.seq_kv, c.heads_kv, c.dim_qk, c.layout, c.placement),
        v(memory, c.dtype, c.batch, c.seq_kv, c.heads_kv, c.dim_v, c.layout, c.placement),
        grad_o(memory, c.dtype, c.batch, c.seq_q, c.heads_q, c.dim_v, c.layout, c.placement) {
    const std::string name = c.to_string();
    q.fill_random(seed_from(name + "/q"));
    k.fill_random(seed_from(name + "/k"));
    v.fill_random(seed_from(name + "/v"));
    grad_o.fill_random(seed_from(name + "/grad_o"));
  }

  // The inputs' exact values for the reference, read through their strides.
  cpu::PackedInputs packed(bool with_grad_o) const {
    std::vector<unsigned char> q_now = q.download(), k_now = k.download(), v_now = v.download(),
                               grad_o_now = grad_o.download();
    const TensorView grad_o_view = grad_o.host_view(grad_o_now);
    return cpu::pack_inputs(q.host_view(q_now), k.host_view(k_now), v.host_view(v_now),
                            with_grad_o ? &grad_o_view : nullptr);
  }

  TestTensor q, k, v, grad_o;
};

struct ForwardOutputs {
  ForwardOutputs(const Case& c, MemoryKind memory)
      : o(memory, c.dtype, c.batch, c.seq_q, c.heads_q, c.dim_v, c.layout, c.placement),
        lse(TestTensor::row_stats(memory, c.batch, c.heads_q, c.seq_q, c.placement)) {
    o.poison();
    lse.poison();
  }
  TestTensor o, lse;
};

// The sinks' gradient, fp32 [heads_q]. It sums -P_sink · Dterm over every
// row of a head, so in f16 and bf16 its error is that of the rounded O
// summed over hundreds of rows: a random walk whose size the rule's 2x
// against one naive realization does not bound for four numbers. So:
//   - against fp64 from the backend's own O and LSE (what the backward is
//     responsible for; the forward's O and LSE are judged on their own),
//     to fp32 summation accuracy, every dtype;
//   - against the fp64 reference by the rule, f32.
void compare_sink_gradient(Findings& findings, const Case& c, const Problem& p,
                           const std::vector<float>& got, const std::vector<double>& o,
                           const std::vector<double>& lse, const cpu::PackedInputs& in,
                           const cpu::BackwardResult& ref, const cpu::BackwardResult& naive) {
  for (std::int64_t h = 0; h < c.heads_q; ++h) {
    double expected = 0.0, magnitude = 0.0;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t i = 0; i < c.seq_q; ++i) {
        double dterm = 0.0;
        const std::int64_t row = ((b * c.seq_q + i) * c.heads_q + h) * c.dim_v;
        for (std::int64_t d = 0; d < c.dim_v; ++d) dterm += in.grad_o[row + d] * o[row + d];
        const double term = std::exp(p.sink(h) - lse[(b * c.heads_q + h) * c.seq_q + i]) * dterm;
        expected -= term;
        magnitude += std::abs(term);
      }
    const double bound = 1e-5 * std::max(1.0, magnitude);
    if (!(std::abs(got[h] - expected) <= bound)) {
      findings.add("grad_sinks[" + std::to_string(h) + "] = " + number(got[h]) + ", from its own O " +
                   "and LSE in fp64 " + number(expected) + " (allowed " + number(bound) + ")");
    }
  }
  if (c.dtype != DType::f32) return;
  const std::vector<double> out(got.begin(), got.end());
  const cpu::RuleCheck rule = cpu::apply_correctness_rule(out, naive.grad_sinks, ref.grad_sinks,
                                                          absolute_slack(DType::f32));
  if (report_requested()) {
    std::printf("    %-6s max|out-ref| %-10s naive %-10s bound %s\n", "grad_sinks",
                number(rule.error).c_str(), number(rule.naive_error).c_str(),
                number(rule.bound).c_str());
  }
  if (!rule.pass) {
    findings.add("grad_sinks: max|out - ref| = " + number(rule.error) + " exceeds " +
                 number(rule.bound) + " (2 * naive same-dtype error " +
                 number(rule.naive_error) + " + atol)");
  }
}

// The options of a case's call: the given ones with the case's mask and
// modifiers, its sinks and ALiBi slopes (ScoreOptions) in the call's memory;
// and the same options with them on the host, for the reference.
class CaseOptions {
 public:
  CaseOptions(const Case& c, const Options& given)
      : vectors_(ScoreSpec{-1, -1, 0.0, c.alibi, c.sinks, CausalAlignment::bottom_right,
                           c.user_mask},
                 c, given.backend),
        call_(given) {
    call_.causal = c.causal;
    if (c.has_window()) {
      call_.window_left = c.window_left;
      call_.window_right = c.window_right;
    }
    if (c.alignment == CausalAlignment::top_left) call_.causal_alignment = c.alignment;
    if (c.softcap > 0.0) call_.softcap = c.softcap;
    reference_ = call_;
    if (c.sinks) {
      call_.sinks = vectors_.options().sinks;
      reference_.sinks = vectors_.host_options().sinks;
    }
    if (c.alibi > 0) {
      call_.alibi_slopes = vectors_.options().alibi_slopes;
      reference_.alibi_slopes = vectors_.host_options().alibi_slopes;
    }
    if (c.user_mask > 0) {
      call_.mask_mod = reference_.mask_mod = vectors_.options().mask_mod;
      call_.mask_tensors = vectors_.options().mask_tensors;
      reference_.mask_tensors = vectors_.host_options().mask_tensors;
    }
  }
  CaseOptions(const CaseOptions&) = delete;  // the options point into this object
  const Options& call() const { return call_; }
  const Options& reference() const { return reference_; }

 private:
  ScoreOptions vectors_;  // the case's sinks, slopes and mask arrays
  Options call_, reference_;
};

}  // namespace

MemoryKind memory_for(Backend backend) {
  return backend == Backend::cuda ? MemoryKind::cuda : MemoryKind::host;
}

double absolute_slack(DType dtype) { return cpu::absolute_slack(dtype); }

::testing::AssertionResult check_forward(const Case& c, const Options& given) {
  const CaseOptions case_options(c, given);
  const Options& options = case_options.call();
  const MemoryKind memory = memory_for(options.backend);
  Findings findings(c.to_string() + " forward on " + to_string(options.backend));
  Inputs in(c, memory);
  ForwardOutputs out(c, memory);

  ForwardArgs args;
  args.q = in.q.view(), args.k = in.k.view(), args.v = in.v.view();
  args.o = out.o.view();
  args.lse = out.lse.stats_view();
  try {
    forward(args, options);
  } catch (const std::exception& e) {
    findings.add(std::string("forward threw: ") + e.what());
    return findings.result();
  }

  expect_unchanged(findings, "q", in.q);
  expect_unchanged(findings, "k", in.k);
  expect_unchanged(findings, "v", in.v);
  const std::vector<unsigned char> o_now = expect_written(findings, "o", out.o);
  const std::vector<unsigned char> lse_now = expect_written(findings, "lse", out.lse);

  const Problem p = c.problem(case_options.reference());
  const cpu::PackedInputs packed = in.packed(false);
  const cpu::ForwardResult ref = cpu::reference_forward(p, packed);
  const cpu::ForwardResult naive = cpu::naive_same_dtype_forward(p, packed);
  if (report_requested()) std::printf("  %s\n", c.to_string().c_str());
  compare(findings, "o", out.o, out.o.values(o_now), ref.o, naive.o, c.dtype);
  compare(findings, "lse", out.lse, out.lse.values(lse_now), ref.lse, naive.lse, DType::f32);
  return findings.result();
}

::testing::AssertionResult check_backward(const Case& c, const Options& given) {
  const CaseOptions case_options(c, given);
  const Options& options = case_options.call();
  const MemoryKind memory = memory_for(options.backend);
  Findings findings(c.to_string() + " backward on " + to_string(options.backend));
  Inputs in(c, memory);
  ForwardOutputs fwd(c, memory);

  ForwardArgs forward_args;
  forward_args.q = in.q.view(), forward_args.k = in.k.view(), forward_args.v = in.v.view();
  forward_args.o = fwd.o.view();
  forward_args.lse = fwd.lse.stats_view();
  try {
    forward(forward_args, options);
  } catch (const std::exception& e) {
    findings.add(std::string("the forward before the backward threw: ") + e.what());
    return findings.result();
  }
  fwd.o.snapshot();
  fwd.lse.snapshot();

  TestTensor grad_q(memory, c.dtype, c.batch, c.seq_q, c.heads_q, c.dim_qk, c.layout, c.placement);
  TestTensor grad_k(memory, c.dtype, c.batch, c.seq_kv, c.heads_kv, c.dim_qk, c.layout, c.placement);
  TestTensor grad_v(memory, c.dtype, c.batch, c.seq_kv, c.heads_kv, c.dim_v, c.layout, c.placement);
  grad_q.poison();
  grad_k.poison();
  grad_v.poison();

  // The sinks' gradient (fp32 [heads_q], in the call's memory), poisoned with NaN.
  std::vector<float> grad_sinks(options.sinks.given() ? c.heads_q : 0, std::nanf(""));
  std::unique_ptr<Storage> grad_sinks_storage;
  Options backward_options = options;
  if (options.sinks.given()) {
    const std::size_t bytes = grad_sinks.size() * sizeof(float);
    grad_sinks_storage = make_storage(memory, bytes);
    grad_sinks_storage->upload(grad_sinks.data(), bytes);
    backward_options.grad_sinks = HeadVectorView::heads(
        static_cast<float*>(grad_sinks_storage->data()), c.heads_q, memory);
  }

  BackwardArgs args;
  args.q = in.q.view(), args.k = in.k.view(), args.v = in.v.view();
  args.o = fwd.o.view(), args.grad_o = in.grad_o.view();
  args.lse = fwd.lse.stats_view();
  args.grad_q = grad_q.view(), args.grad_k = grad_k.view(), args.grad_v = grad_v.view();
  try {
    backward(args, backward_options);
  } catch (const std::exception& e) {
    findings.add(std::string("backward threw: ") + e.what());
    return findings.result();
  }

  expect_unchanged(findings, "q", in.q);
  expect_unchanged(findings, "k", in.k);
  expect_unchanged(findings, "v", in.v);
  expect_unchanged(findings, "o", fwd.o);
  expect_unchanged(findings, "grad_o", in.grad_o);
  expect_unchanged(findings, "lse", fwd.lse);
  const std::vector<unsigned char> dq_now = expect_written(findings, "grad_q", grad_q);
  const std::vector<unsigned char> dk_now = expect_written(findings, "grad_k", grad_k);
  const std::vector<unsigned char> dv_now = expect_written(findings, "grad_v", grad_v);

  if (grad_sinks_storage)
    grad_sinks_storage->download(grad_sinks.data(), grad_sinks.size() * sizeof(float));
  const Problem p = c.problem(case_options.reference());
  const cpu::PackedInputs packed = in.packed(true);
  const cpu::BackwardResult ref = cpu::reference_backward(p, packed);
  const cpu::BackwardResult naive = cpu::naive_same_dtype_backward(p, packed);
  if (report_requested()) std::printf("  %s\n", c.to_string().c_str());
  compare(findings, "grad_q", grad_q, grad_q.values(dq_now), ref.grad_q, naive.grad_q, c.dtype);
  compare(findings, "grad_k", grad_k, grad_k.values(dk_now), ref.grad_k, naive.grad_k, c.dtype);
  compare(findings, "grad_v", grad_v, grad_v.values(dv_now), ref.grad_v, naive.grad_v, c.dtype);
  if (options.sinks.given()) {
    compare_sink_gradient(findings, c, p, grad_sinks, fwd.o.values(fwd.o.download()),
                          fwd.lse.values(fwd.lse.download()), packed, ref, naive);
  }
  return findings.result();
}

}  // namespace flashgen::testing
