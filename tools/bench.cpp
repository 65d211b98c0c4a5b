// `flashgen bench`: for each head dimension, validate a small problem against
// the fp64 reference, then time forward and backward on the benchmark shape
// (median of repeats after warm-up; on a GPU with CUDA events and several
// input sets rotated so the L2 cache cannot serve one call from the last).
// On a GPU the two kernels of the deterministic backward are also timed
// alone, to show which of them holds the backward back.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "api/plan.hpp"
#include "arguments.hpp"
#include "bench_report.hpp"
#include "check.hpp"
#include "commands.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/runtime/runtime.hpp"
#include "problem_options.hpp"
#include "sweep.hpp"
#include "timing.hpp"
#include "workload.hpp"

namespace flashgen::cli {
namespace {

// The benchmark shape of DESIGN.md on a GPU; on the CPU one the CPU times in seconds.
struct Defaults {
  std::int64_t batch, heads, seq;
  std::vector<std::int64_t> dims;
  int repeats, warmup, input_sets;
};
const Defaults kGpuDefaults{2, 16, 8192, {64, 128}, 20, 5, 2};
const Defaults kCpuDefaults{1, 8, 1024, {64, 128}, 3, 1, 1};

constexpr double kH200Bf16GemmTflops = 751;  // measured dense bf16 GEMM ceiling
constexpr std::int64_t kValidationSeq = 256;  // sequence length of the validated small problem
constexpr std::uint64_t kSeed = 8192;
constexpr std::size_t kPoolElements = std::size_t{1} << 24;  // 32 MiB of bf16 random values


struct Settings {
  Backend backend = Backend::cpu;
  MemoryKind memory = MemoryKind::host;
  bool on_gpu = false;
  Shape base;  // dims filled per row
  std::vector<std::int64_t> dims;
  int repeats = 1, warmup = 0, input_sets = 1, threads = 0;
  bool time_forward = true, time_backward = true, time_backward_atomic = false;
  bool time_backward_stages = false;  // backward_query, backward_key_value alone
  bool deterministic = true;
  double gemm_tflops = kH200Bf16GemmTflops;
  std::int64_t validation_seq = kValidationSeq;
  std::string json_path;
};

Arguments declare() {
  Arguments a(
      "bench",
      "[--backend cpu|cuda] [--dims 64,128 | --sweep] [--batch B --heads H\n"
      "                      --heads-kv H --seq N --dtype bf16 --causal] [--repeats R --warmup W]\n"
      "                      [--input-sets S] [--kinds forward,backward,backward_atomic]\n"
      "                      [--deterministic 0|1] [--ceiling-tflops T] [--validate-seq N]\n"
      "                      [--threads N] [--json out.json]",
      "Validates one small problem of each head dimension D against the fp64 reference,\n"
      "then times forward and backward (median of --repeats after --warmup calls) and\n"
      "prints one row per D: times, FLOP rates (FlashAttention convention; causal counts\n"
      "unmasked pairs), % of the bf16 GEMM ceiling and GINSTRS (forward (2D+5)N^2,\n"
      "backward (3D+5)N^2 + (4D+5)N^2 per head, over seconds / 1e9).\n"
      "On a GPU, timing the backward also times its two deterministic kernels alone:\n"
      "bq = backward_query (Dterm, dQ; 3 GEMMs: 1.5x forward FLOPs, (3D+5)N^2 per head),\n"
      "bkv = backward_key_value (dK, dV; 4 GEMMs: 2x forward FLOPs, (4D+5)N^2 per head);\n"
      "both recompute S and dP, so bq + bkv FLOPs (3.5x) exceed the backward's 2.5x.\n"
      "On a GPU the JSON also has each call's host time (fwd_host_us, bwd_host_us,\n"
      "bwd_atomic_host_us: median microseconds the caller's thread spends in one call).\n"
      "GPU defaults: B=2 H=16 N=8192 D=64,128, 20 repeats after 5 warm-up, 2 input sets.\n"
      "CPU defaults: B=1 H=8 N=1024 D=64,128, 3 repeats after 1 warm-up.\n"
      "Exit code 1 when a validation or a run fails (refused shapes only print why).");
  a.option("backend", "NAME", "cuda (default when a GPU can run) or cpu");
  declare_dims_options(a);
  a.option("batch", "B", "batch size");
  a.option("heads", "H", "query heads");
  a.option("heads-kv", "H", "key/value heads, dividing --heads (default: --heads)");
  a.option("seq", "N", "sequence length of queries and keys");
  a.option("dtype", "T", "bf16 (default), f16 or f32");
  a.flag("causal", "causal mask");
  a.option("repeats", "R", "timed calls per measurement");
  a.option("warmup", "W", "untimed calls before them");
  a.option("input-sets", "S", "input sets rotated between calls (GPU default 2)");
  a.option("kinds", "K,K", "forward, backward, backward_atomic (default forward,backward);\n"
                           "                          backward_atomic adds a timing with "
                           "--deterministic 0");
  a.option("deterministic", "0|1", "Options::deterministic of the backward timing (default 1)");
  a.option("ceiling-tflops", "T", "bf16 GEMM ceiling for the % column (default 751, H200)");
  a.option("validate-seq", "N", "sequence length of the validated problem (default 256)");
  a.option("threads", "N", "CPU threads (default: all)");
  a.option("json", "PATH", "also write the rows as JSON");
  return a;
}

Settings settings_from(const Arguments& a) {
  Settings s;
  const std::string default_backend = cuda::availability().ok ? "cuda" : "cpu";
  s.backend = choose_backend(a.choice("backend", default_backend, {"cpu", "cuda"}));
  s.memory = memory_for(s.backend);
  s.on_gpu = s.backend == Backend::cuda;
  const Defaults& d = s.on_gpu ? kGpuDefaults : kCpuDefaults;
  s.dims = dims_from(a, d.dims, kMaxCommandDim);
  s.base.batch = a.integer("batch", d.batch, 1);
  s.base.heads_q = a.integer("heads", d.heads, 1);
  s.base.heads_kv = a.integer("heads-kv", s.base.heads_q, 1);
  if (s.base.heads_q % s.base.heads_kv != 0)
    throw UsageError("flashgen bench: --heads-kv (" + std::to_string(s.base.heads_kv) +
                     ") must divide --heads (" + std::to_string(s.base.heads_q) + ")");
  s.base.seq_q = s.base.seq_kv = a.integer("seq", d.seq, 1);
  s.base.dtype = dtype_named(a.choice("dtype", "bf16", {"bf16", "f16", "f32"}));
  s.base.causal = a.given("causal");
  s.repeats = static_cast<int>(a.integer("repeats", d.repeats, 1, 1 << 20));
  s.warmup = static_cast<int>(a.integer("warmup", d.warmup, 0, 1 << 20));
  s.input_sets = static_cast<int>(a.integer("input-sets", d.input_sets, 1, 64));
  const std::vector<std::string> kinds = a.choice_list(
      "kinds", {"forward", "backward"}, {"forward", "backward", "backward_atomic"});
  const auto has = [&](const char* kind) {
    return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
  };
  s.time_forward = has("forward");
  s.time_backward_atomic = has("backward_atomic");
  s.time_backward = has("backward") || s.time_backward_atomic;  // atomic is timed beside it
  s.deterministic = a.integer("deterministic", 1, 0, 1) == 1;
  // The CPU backend runs the backward as one pass: no kernels to time alone.
  s.time_backward_stages = s.time_backward && s.on_gpu;
  // The atomic timing measures the atomic kernels at every D, also where the
  // planner would prefer the two-kernel backward (a caller's own setting wins).
  if (s.time_backward_atomic) setenv("FLASHGEN_BACKWARD", "atomic", 0);
  s.gemm_tflops = a.number("ceiling-tflops", kH200Bf16GemmTflops, 0.0);
  s.validation_seq = a.integer("validate-seq", kValidationSeq, 1);
  s.threads = static_cast<int>(a.integer("threads", 0, 0, 1 << 16));
  s.json_path = a.text("json", "");
  return s;
}

Options options_for(const Settings& s, bool deterministic) {
  Options o;
  o.backend = s.backend;
  o.causal = s.base.causal;
  o.deterministic = deterministic;
  o.cpu_threads = s.threads;
  return o;
}

BenchHeader header_for(const Settings& s) {
  BenchHeader h;
  h.backend = to_string(s.backend);
  h.on_gpu = s.on_gpu;
  h.gemm_tflops = s.gemm_tflops;
  h.backward_atomic = s.time_backward_atomic;
  h.backward_stages = s.time_backward_stages;
  h.date = local_date_time();
  h.driver = "-";
  h.nvrtc = "-";
  try {
    h.nvrtc = cuda::nvrtc_version();
  } catch (const std::exception&) {
  }
  if (s.on_gpu) {
    const cuda::DeviceInfo& device = cuda::device_info(cuda::current_device());
    h.device = device.name + " (" + device.arch() + ")";
    h.driver = device.driver_version;
  } else {
    h.device = "CPU (" + std::to_string(system_info().cpu_threads) + " threads)";
  }
  char text[256];
  std::snprintf(text, sizeof(text), "B=%lld H=%lld Hkv=%lld N=%lld %s %s, median of %d after %d warm-up%s",
                static_cast<long long>(s.base.batch), static_cast<long long>(s.base.heads_q),
                static_cast<long long>(s.base.heads_kv), static_cast<long long>(s.base.seq_q),
                to_string(s.base.dtype), s.base.causal ? "causal" : "non-causal", s.repeats,
                s.warmup,
                s.on_gpu ? (", " + std::to_string(s.input_sets) + " input sets").c_str() : "");
  h.settings = text;
  return h;
}

Shape with_dim(Shape shape, std::int64_t dim) {
  shape.dim_qk = shape.dim_v = dim;
  return shape;
}

// Runs the small problem of this D and checks every output; "" when it passes.
std::string validate(const Settings& s, std::int64_t dim, const RandomPool& pool) {
  Shape shape = with_dim(s.base, dim);
  const std::int64_t group = shape.heads_q / std::max<std::int64_t>(shape.heads_kv, 1);
  shape.batch = 1;
  shape.heads_kv = std::min<std::int64_t>(shape.heads_kv, 2);  // two heads exercise head strides
  shape.heads_q = shape.heads_kv * group;
  shape.seq_q = shape.seq_kv = std::min(s.validation_seq, s.base.seq_q);
  Workload w(shape, s.memory, pool, kSeed + static_cast<std::uint64_t>(dim));
  const Options options = options_for(s, s.deterministic);
  forward(w.forward_args(), options);
  const Problem p = api::plan_call(w.forward_args(), options).problem;
  std::vector<bool> backward_variants;  // deterministic flags to check
  if (s.time_backward) backward_variants.push_back(s.deterministic);
  if (s.time_backward_atomic && s.deterministic) backward_variants.push_back(false);
  if (s.time_backward_stages && !s.deterministic) backward_variants.push_back(true);
  if (backward_variants.empty()) {
    const CheckReport report = check_outputs(w, p, false, shape.batch, shape.heads_kv, s.threads);
    return report.pass() ? "" : "validation failed: " + report.first_failure();
  }
  for (bool deterministic : backward_variants) {
    w.poison_gradients();
    backward(w.backward_args(), options_for(s, deterministic));
    const CheckReport report = check_outputs(w, p, true, shape.batch, shape.heads_kv, s.threads);
    if (!report.pass())
      return std::string("validation failed") + (deterministic ? "" : " (atomic backward)") + ": " +
             report.first_failure();
  }
  return "";
}

void append_unique(std::vector<std::string>& to, const std::vector<std::string>& from) {
  for (const std::string& item : from)
    if (std::find(to.begin(), to.end(), item) == to.end()) to.push_back(item);
}

CallTimes time_calls(const Settings& s, const std::function<void()>& body) {
  return median_times(s.memory, body, s.warmup, s.repeats);
}

// Times one backward variant over the rotated sets.
CallTimes time_backward(const Settings& s, std::vector<BackwardArgs> args, bool deterministic,
                        std::vector<std::string>& kernels) {
  const Options options = options_for(s, deterministic);
  const Plan plan = plan_backward(args[0], options);
  if (!plan.ok) throw Error(plan.error, plan.reason);
  append_unique(kernels, plan.kernels);
  // Scratch allocated once, outside the timed calls.
  Buffer workspace(s.memory, plan.workspace_bytes);
  for (BackwardArgs& a : args) {
    a.workspace = workspace.data();
    a.workspace_bytes = workspace.bytes();
  }
  std::size_t call = 0;
  return time_calls(s, [&] { backward(args[call++ % args.size()], options); });
}

// Times backward_query and backward_key_value of the deterministic backward,
// each alone, over the rotated sets. Each set gets its own workspace and one
// full backward first: backward_key_value reads the Dterm that backward_query
// left there, and must read the Dterm of its own inputs.
void time_backward_stages(const Settings& s, std::vector<BackwardArgs> args, BenchRow& row) {
  const Options options = options_for(s, true);
  const api::PlannedCall planned = api::plan_call(args[0], options);
  if (!planned.plan.ok) throw Error(planned.plan.error, planned.plan.reason);
  append_unique(row.kernels, planned.plan.kernels);
  std::vector<Buffer> workspaces;
  workspaces.reserve(args.size());  // the arguments point into them
  for (BackwardArgs& a : args) {
    const Buffer& workspace = workspaces.emplace_back(s.memory, planned.plan.workspace_bytes);
    a.workspace = workspace.data();
    a.workspace_bytes = workspace.bytes();
    backward(a, options);
  }
  const auto time_stage = [&](KernelKind stage) {
    std::size_t call = 0;
    return median_ms(
        s.memory,
        [&] {
          cuda::backward_stage(planned.problem, args[call++ % args.size()], options.stream, stage);
        },
        s.warmup, s.repeats);
  };
  row.backward_query_ms = time_stage(KernelKind::backward_query);
  row.backward_key_value_ms = time_stage(KernelKind::backward_key_value);
}

BenchRow bench_dim(const Settings& s, std::int64_t dim, const RandomPool& pool) {
  BenchRow row;
  row.dim = dim;
  const Shape shape = with_dim(s.base, dim);
  try {
    // Wrong results are a failure of the run, never a refusal.
    const std::string validation_failure = validate(s, dim, pool);
    if (!validation_failure.empty()) throw Error(ErrorCode::runtime, validation_failure);
    std::vector<Workload> sets;
    for (int i = 0; i < s.input_sets; ++i)
      sets.emplace_back(shape, s.memory, pool, kSeed * 31 + static_cast<std::uint64_t>(i));
    std::vector<ForwardArgs> forward_args;
    std::vector<BackwardArgs> backward_args;
    for (const Workload& w : sets) {
      forward_args.push_back(w.forward_args());
      backward_args.push_back(w.backward_args());
    }
    const Options options = options_for(s, s.deterministic);
    const api::PlannedCall planned = api::plan_call(forward_args[0], options);
    if (!planned.plan.ok) throw Error(planned.plan.error, planned.plan.reason);
    row.problem = planned.problem;
    append_unique(row.kernels, planned.plan.kernels);

    // Every set gets its own O and LSE before a backward reads them.
    for (const ForwardArgs& a : forward_args) forward(a, options);
    if (s.time_forward) {
      std::size_t call = 0;
      const CallTimes t =
          time_calls(s, [&] { forward(forward_args[call++ % forward_args.size()], options); });
      row.forward_ms = t.ms;
      row.forward_host_us = t.host_us;
    }
    if (s.time_backward) {
      const CallTimes t = time_backward(s, backward_args, s.deterministic, row.kernels);
      row.backward_ms = t.ms;
      row.backward_host_us = t.host_us;
    }
    if (s.time_backward_atomic) {
      const CallTimes t = time_backward(s, backward_args, false, row.kernels);
      row.backward_atomic_ms = t.ms;
      row.backward_atomic_host_us = t.host_us;
    }
    if (s.time_backward_stages) time_backward_stages(s, backward_args, row);
  } catch (const Error& error) {
    row.error = error.what();
    // Refusals (a shape a backend does not take) are reported, not failures.
    row.failed = error.code() == ErrorCode::runtime;
    row.forward_ms = row.backward_ms = row.backward_atomic_ms = -1;
    row.backward_query_ms = row.backward_key_value_ms = -1;
  }
  if (row.problem.batch == 0) {  // refused before planning: describe the asked shape
    row.problem.batch = shape.batch;
    row.problem.heads_q = shape.heads_q;
    row.problem.heads_kv = shape.heads_kv;
    row.problem.seq_q = shape.seq_q;
    row.problem.seq_kv = shape.seq_kv;
    row.problem.dim_qk = row.problem.dim_v = dim;
    row.problem.dtype = shape.dtype;
    row.problem.causal = shape.causal;
  }
  return row;
}

// One line on stderr, rewritten in place on a terminal.
void progress(std::size_t index, std::size_t count, std::int64_t dim) {
  if (count < 2) return;
  const bool terminal = isatty(STDERR_FILENO) != 0;
  std::fprintf(stderr, "%sbench: D=%lld (%zu/%zu)%s", terminal ? "\r\033[K" : "",
               static_cast<long long>(dim), index + 1, count, terminal ? "" : "\n");
  std::fflush(stderr);
}

void end_progress(std::size_t count) {
  if (count >= 2 && isatty(STDERR_FILENO)) std::fprintf(stderr, "\r\033[K");
}

}  // namespace

int bench_command(const std::vector<std::string>& words) {
  Arguments arguments = declare();
  if (!arguments.parse(words)) return kExitOk;
  const Settings s = settings_from(arguments);
  if (s.on_gpu) {
    const cuda::Availability available = cuda::availability();
    if (!available.ok) {
      std::fprintf(stderr, "flashgen bench: the CUDA backend cannot run here: %s\n",
                   available.reason.c_str());
      return kExitRefused;
    }
  }
  const BenchHeader header = header_for(s);
  print_header(header);

  Shape largest = with_dim(s.base, *std::max_element(s.dims.begin(), s.dims.end()));
  const RandomPool pool(s.base.dtype, std::min(largest_tensor_elements(largest), kPoolElements),
                        kSeed);
  std::vector<BenchRow> rows;
  bool any_failed = false;
  for (std::size_t i = 0; i < s.dims.size(); ++i) {
    progress(i, s.dims.size(), s.dims[i]);
    BenchRow row = bench_dim(s, s.dims[i], pool);
    end_progress(s.dims.size());
    print_row(header, row);
    any_failed = any_failed || row.failed;
    rows.push_back(std::move(row));
  }
  if (!s.json_path.empty()) write_json(s.json_path, header, rows);
  return any_failed ? kExitCheckFailed : kExitOk;
}

}  // namespace flashgen::cli
