// `flashgen run`: forward + backward on one problem, with the plan, times and
// a check against the fp64 reference on the first key/value head group.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "api/plan.hpp"
#include "arguments.hpp"
#include "check.hpp"
#include "commands.hpp"
#include "cuda/cuda_backend.hpp"
#include "problem_options.hpp"
#include "timing.hpp"
#include "workload.hpp"

namespace flashgen::cli {
namespace {

// Defaults: the CPU finishes in seconds; the GPU gets a realistic size.
constexpr Shape kCpuDefault{1, 8, 8, 1024, 1024, 64, 64, DType::bf16, false};
constexpr Shape kGpuDefault{2, 16, 16, 4096, 4096, 128, 128, DType::bf16, false};
constexpr int kGpuRepeats = 5;  // timed calls after the first one on a GPU
constexpr int kGpuWarmup = 1;
constexpr std::uint64_t kSeed = 2024;
constexpr std::size_t kPoolElements = std::size_t{1} << 22;  // 8 MiB of bf16 values

Arguments declare() {
  Arguments a("run",
              "[--backend auto|cpu|cuda] [--batch B] [--heads H] [--heads-kv H] [--seq N]\n"
              "                    [--seq-kv N] [--dim D] [--dim-v D] [--dtype bf16|f16|f32] "
              "[--causal]\n"
              "                    [--top-left] [--window-left L] [--window-right R] [--softcap C]\n"
              "                    [--sinks] [--alibi] [--mask-mod EXPR [--documents L,...]]\n"
              "                    [--scale S] [--deterministic 0|1] [--threads N] [--no-check]",
              "Runs one forward and one backward with random inputs, prints the plan (what\n"
              "runs), the times and the error against the fp64 reference on batch 0 and key/\n"
              "value head 0 with its query heads. Exit code 1 when an output is outside\n"
              "max|out-ref| <= 2 max|naive-ref| + atol, 3 when the problem is refused.\n"
              "Defaults: B=1 H=8 N=1024 D=64 on the CPU, B=2 H=16 N=4096 D=128 on a GPU.");
  a.option("backend", "NAME", "auto (GPU when one can run, else CPU), cpu or cuda");
  a.option("batch", "B", "batch size");
  a.option("heads", "H", "query heads");
  a.option("heads-kv", "H", "key/value heads, dividing --heads (default: --heads)");
  a.option("seq", "N", "query sequence length");
  a.option("seq-kv", "N", "key/value sequence length (default: --seq)");
  a.option("dim", "D", std::string("head dimension of queries and keys, ") + kDimRange);
  a.option("dim-v", "D", "head dimension of values (default: --dim)");
  a.option("dtype", "T", "bf16 (default), f16 or f32");
  a.flag("causal", "causal mask, bottom-right aligned");
  a.flag("top-left", "causal aligned top-left (query i sees keys j <= i), as SDPA's is_causal");
  a.option("window-left", "L", "sliding window: query i sees keys j >= i + seq_kv - seq_q - L");
  a.option("window-right", "R", "... and j <= i + seq_kv - seq_q + R");
  a.option("softcap", "C", "logits C * tanh(s / C) (default 0: none)");
  a.flag("sinks", "a sink logit per query head, spread over [-1, 2) (gpt-oss)");
  a.flag("alibi", "ALiBi slopes 2^-(h+1), one per query head");
  a.option("mask-mod", "EXPR",
           "a user mask over b, h, q_idx, kv_idx and doc[], the document of each position");
  a.option("documents", "L,...",
           "lengths of the packed documents doc[] numbers, repeated over the positions "
           "(default 37,1,90,130,64,200)");
  a.option("scale", "S", "softmax scale (default 1/sqrt(dim))");
  a.option("deterministic", "0|1", "1 (default): bit-identical backward; 0 allows atomics");
  a.option("threads", "N", "CPU threads (default: all)");
  a.flag("no-check", "time only: no fp64 reference (minutes on the CPU for long sequences)");
  return a;
}

Shape shape_from(const Arguments& a, const Shape& d) {
  Shape s;
  s.batch = a.integer("batch", d.batch, 1);
  s.heads_q = a.integer("heads", d.heads_q, 1);
  s.heads_kv = a.integer("heads-kv", s.heads_q, 1);
  s.seq_q = a.integer("seq", d.seq_q, 0);
  s.seq_kv = a.integer("seq-kv", s.seq_q, 0);
  s.dim_qk = a.integer("dim", d.dim_qk, 1, kMaxCommandDim);
  s.dim_v = a.integer("dim-v", s.dim_qk, 1, kMaxCommandDim);
  s.dtype = dtype_named(a.choice("dtype", "bf16", {"bf16", "f16", "f32"}));
  s.causal = a.given("causal");
  return s;
}

// The per-head vectors of --sinks and --alibi, on the host (for the
// reference) and in the tensors' memory (for the call), with the sinks'
// gradient the backward writes.
class HeadVectors {
 public:
  HeadVectors(std::int64_t heads, bool sinks, bool alibi, MemoryKind memory) : memory_(memory) {
    for (std::int64_t h = 0; h < heads && sinks; ++h)
      sinks_.push_back(-1.0f + 3.0f * static_cast<float>(h) / static_cast<float>(heads));
    for (std::int64_t h = 0; h < heads && alibi; ++h)
      slopes_.push_back(std::ldexp(1.0f, static_cast<int>(-(h + 1))));
    const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(heads);
    sinks_buffer_ = Buffer(memory, sinks ? bytes : 0);
    slopes_buffer_ = Buffer(memory, alibi ? bytes : 0);
    grad_sinks_buffer_ = Buffer(memory, sinks ? bytes : 0);
    if (sinks) sinks_buffer_.upload(sinks_.data(), bytes, 0);
    if (alibi) slopes_buffer_.upload(slopes_.data(), bytes, 0);
  }
  void add_to(Options& options) const {
    const std::int64_t heads = static_cast<std::int64_t>(std::max(sinks_.size(), slopes_.size()));
    if (!sinks_.empty()) {
      options.sinks = HeadVectorView::heads(static_cast<float*>(sinks_buffer_.data()), heads,
                                            memory_);
      options.grad_sinks = HeadVectorView::heads(
          static_cast<float*>(grad_sinks_buffer_.data()), heads, memory_);
    }
    if (!slopes_.empty())
      options.alibi_slopes = HeadVectorView::heads(static_cast<float*>(slopes_buffer_.data()),
                                                   heads, memory_);
  }
  const std::vector<float>& sinks() const { return sinks_; }
  const std::vector<float>& slopes() const { return slopes_; }

 private:
  MemoryKind memory_;
  std::vector<float> sinks_, slopes_;
  Buffer sinks_buffer_, slopes_buffer_, grad_sinks_buffer_;
};

// doc[] of --mask-mod: the document of each of `positions` positions, for
// documents of `sizes` (each >= 1) repeated; on the host (for the
// reference) and in the tensors' memory (for the call).
class DocumentIds {
 public:
  DocumentIds(std::int64_t positions, const std::vector<std::int64_t>& sizes, MemoryKind memory)
      : memory_(memory) {
    for (std::int32_t d = 0; static_cast<std::int64_t>(ids_.size()) < positions; ++d)
      for (std::int64_t i = 0; i < sizes[d % sizes.size()] &&
                               static_cast<std::int64_t>(ids_.size()) < positions; ++i)
        ids_.push_back(d);
    buffer_ = Buffer(memory, ids_.size() * sizeof(std::int32_t));
    buffer_.upload(ids_.data(), ids_.size() * sizeof(std::int32_t), 0);
  }
  MaskTensorView view() const {
    return MaskTensorView::int32("doc", static_cast<const std::int32_t*>(buffer_.data()),
                                 static_cast<std::int64_t>(ids_.size()), memory_);
  }
  MaskTensorView host_view() const {
    return MaskTensorView::int32("doc", ids_.data(), static_cast<std::int64_t>(ids_.size()));
  }

 private:
  MemoryKind memory_;
  std::vector<std::int32_t> ids_;
  Buffer buffer_;
};

// `p` with the sinks and slopes read from the host copies (the reference
// runs on the CPU).
Problem with_host_vectors(const Problem& p, const HeadVectors& vectors) {
  Problem host = p;
  if (p.sinks.given())
    host.sinks = HeadVectorView::heads(const_cast<float*>(vectors.sinks().data()), p.heads_q);
  if (p.alibi_slopes.given())
    host.alibi_slopes =
        HeadVectorView::heads(const_cast<float*>(vectors.slopes().data()), p.heads_q);
  host.grad_sinks = {};
  return host;
}

void print_plan(const char* label, const Plan& plan) {
  std::printf("%-16s", label);
  for (std::size_t i = 0; i < plan.kernels.size(); ++i)
    std::printf("%s%s\n", i ? "                " : "", plan.kernels[i].c_str());
  if (plan.kernels.empty()) std::printf("(nothing)\n");
  if (plan.workspace_bytes > 0)
    std::printf("%-16s%zu bytes\n", "  workspace:", plan.workspace_bytes);
}

void print_time(const char* label, double first_ms, double ms, double flops, bool on_gpu) {
  const double unit = on_gpu ? 1e12 : 1e9;
  std::printf("%-16s%10.3f ms  %8.2f %s", label, ms, flop_rate(flops, ms, unit),
              on_gpu ? "TFLOP/s" : "GFLOP/s");
  if (on_gpu) std::printf("   (first call %.1f ms, with compilation)", first_ms);
  std::printf("\n");
}

}  // namespace

int run_command(const std::vector<std::string>& words) {
  Arguments arguments = declare();
  if (!arguments.parse(words)) return kExitOk;
  const std::string backend_name = arguments.choice("backend", "auto", {"auto", "cpu", "cuda"});
  const Backend backend = choose_backend(backend_name);
  const bool on_gpu = backend == Backend::cuda;
  const Shape shape = shape_from(arguments, on_gpu ? kGpuDefault : kCpuDefault);

  Options options;
  options.causal = shape.causal;
  if (arguments.given("top-left")) options.causal_alignment = CausalAlignment::top_left;
  options.window_left = arguments.integer("window-left", -1, -1);
  options.window_right = arguments.integer("window-right", -1, -1);
  options.softcap = arguments.number("softcap", 0.0, 0.0);
  options.backend = backend_name == "auto" ? Backend::automatic : backend;
  options.deterministic = arguments.integer("deterministic", 1, 0, 1) == 1;
  options.cpu_threads = static_cast<int>(arguments.integer("threads", 0, 0, 1 << 16));
  if (arguments.given("scale"))
    options.scale = arguments.number("scale", 0.0, -std::numeric_limits<double>::infinity());

  // A GPU run needs a context before buffers exist; where there is none the
  // planner explains why, so only touch the device when it can run.
  const MemoryKind memory = memory_for(backend);
  if (on_gpu && !cuda::availability().ok) {
    std::fprintf(stderr, "flashgen run: the CUDA backend cannot run here: %s\n",
                 cuda::availability().reason.c_str());
    return kExitRefused;
  }
  const RandomPool pool(shape.dtype, std::min(largest_tensor_elements(shape), kPoolElements), kSeed);
  Workload w(shape, memory, pool, kSeed);
  const ForwardArgs forward_args = w.forward_args();
  const BackwardArgs backward_args = w.backward_args();
  HeadVectors vectors(shape.heads_q, arguments.given("sinks"), arguments.given("alibi"), memory);
  vectors.add_to(options);
  const DocumentIds documents(std::max<std::int64_t>(std::max(shape.seq_q, shape.seq_kv), 1),
                              arguments.integer_list("documents", {37, 1, 90, 130, 64, 200}, 1,
                                                     std::numeric_limits<std::int32_t>::max()),
                              memory);
  if (arguments.given("mask-mod")) {
    options.mask_mod = arguments.text("mask-mod", "");
    options.mask_tensors = {documents.view()};
  }

  const api::PlannedCall forward_plan = api::plan_call(forward_args, options);
  const api::PlannedCall backward_plan = api::plan_call(backward_args, options);
  for (const api::PlannedCall* planned : {&forward_plan, &backward_plan}) {
    if (planned->plan.ok) continue;
    std::fprintf(stderr, "flashgen run: refused: %s\n", planned->plan.reason.c_str());
    return kExitRefused;
  }
  const Problem& p = forward_plan.problem;
  Problem reference = with_host_vectors(p, vectors);
  if (p.has_mask()) {
    Options host_mask;
    host_mask.mask_mod = options.mask_mod;
    host_mask.mask_tensors = {documents.host_view()};
    reference.mask = bind_mask(host_mask);
  }
  std::printf("problem:        %s\n", api::describe(p).c_str());
  std::printf("backend:        %s\n", to_string(forward_plan.plan.backend));
  print_plan("forward plan:", forward_plan.plan);
  print_plan("backward plan:", backward_plan.plan);

  const auto run_forward = [&] { forward(forward_args, options); };
  const auto run_backward = [&] { backward(backward_args, options); };
  const double forward_first = first_call_ms(memory, run_forward);
  const double backward_first = first_call_ms(memory, run_backward);
  double forward_ms = forward_first, backward_ms = backward_first;
  if (on_gpu) {
    // Compilation is behind us: time steady-state calls.
    forward_ms = median_ms(memory, run_forward, kGpuWarmup, kGpuRepeats);
    backward_ms = median_ms(memory, run_backward, kGpuWarmup, kGpuRepeats);
  }
  print_time("forward:", forward_first, forward_ms, forward_flops(p), on_gpu);
  print_time("backward:", backward_first, backward_ms, backward_flops(p), on_gpu);

  if (arguments.given("no-check")) {
    std::printf("check:          skipped (--no-check)\n");
    return kExitOk;
  }
  const CheckReport report = check_outputs(w, reference, /*backward=*/true, /*batches=*/1,
                                           /*kv_heads=*/1, options.cpu_threads);
  print_check(report, stdout);
  std::printf("%s\n", report.pass() ? "PASS" : "FAIL");
  return report.pass() ? kExitOk : kExitCheckFailed;
}

}  // namespace flashgen::cli
