// `flashgen tune`: for each (dtype, head dimension, causal) configuration,
// find the fastest correct tuning of each kernel kind on this GPU (see
// src/tune/tuner.hpp for the method) and write one table row per kind.
// Rows are merged into the output table after every configuration, so an
// interrupted run keeps what it finished. --dry-run prunes without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "arguments.hpp"
#include "codegen/heuristics.hpp"
#include "commands.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/kernel_args.hpp"
#include "cuda/runtime/runtime.hpp"
#include "problem_options.hpp"
#include "sweep.hpp"
#include "tune/search_space.hpp"
#include "tune/table_file.hpp"
#include "tune/tuner.hpp"
#include "tune/tuning_table.hpp"
#include "tune_report.hpp"
#include "workload.hpp"

namespace flashgen::cli {
namespace {

// The benchmark shape of DESIGN.md; fewer repeats than `bench`, since most
// candidates are clearly slower after the first look.
constexpr std::int64_t kBatch = 2, kHeads = 16, kSeq = 8192;
const std::vector<std::int64_t> kDims = {64, 128};
constexpr int kWarmup = 2, kRepeats = 7, kInputSets = 2, kTop = 12;
constexpr std::uint64_t kSeed = 1729;
constexpr std::size_t kPoolElements = std::size_t{1} << 24;  // 32 MiB of random bf16 values

// A rough planning rate for --dry-run's time estimate (H200, mma.sync kernels).
constexpr double kPlannedForwardTflops = 250, kPlannedBackwardTflops = 150;
constexpr double kPlannedCompileSeconds = 0.6;  // one kernel on one core (sm_90a, NVRTC 13)
// Kernels compiled per kept candidate: a few of the best estimates spill.
constexpr double kPlannedCompilesPerKept = 1.2;
constexpr double kPlannedClockGhz = 1.8;  // cost-model cycles to milliseconds

struct Settings {
  std::vector<std::int64_t> dims;
  std::vector<DType> dtypes;
  std::vector<bool> causal;
  std::vector<std::string> kind_names;
  Shape base;  // dims, dtype and causal set per configuration
  int input_sets = kInputSets;
  TunerSettings tuner;
  TimingSettings timing;
  std::int64_t seq_min = 1, seq_max = 0;  // bucket of the written rows
  std::string out_path, merge_path;
  double time_limit_s = 0;  // 0: none
  bool resume = false;      // skip configurations the output table already holds
  bool dry_run = false;
  bool list_timed = false;  // print every timed candidate
  std::string arch;  // of --dry-run
};

struct Configuration {
  DType dtype;
  std::int64_t dim;
  bool causal;
  std::string title() const {
    return std::string(to_string(dtype)) + " D=" + std::to_string(dim) +
           (causal ? " causal" : " non-causal");
  }
};

Arguments declare() {
  Arguments a(
      "tune",
      "[--dims 64,128 | --sweep] [--kinds forward,backward,backward_atomic]\n"
      "                     [--dtype bf16,f16] [--causal 0|1|both] [--seq N --batch B --heads H]\n"
      "                     [--seq-bucket MIN,MAX] [--top N] [--repeats R --warmup W --input-sets S]\n"
      "                     [--threads N] [--out table.json] [--merge data/tuning/sm90.json]\n"
      "                     [--time-limit MIN] [--resume]\n"
      "                     [--pipelines-only] [--list-timed] [--dry-run [--arch sm_90a]]",
      "For each dtype, head dimension D (Dqk = Dv) and causal setting, and each kernel kind:\n"
      "prunes the search space without the GPU (invalid tunings, shared memory over the\n"
      "device limit, register spills), checks the best --top candidates by a cost model and\n"
      "the default on a small problem against the fp64 reference (wrong ones are dropped and\n"
      "listed), times them on the given shape and keeps the fastest. A winner must beat the\n"
      "default by 1% when both are timed again; otherwise the row records the default.\n"
      "Prints per D the default's time, the winner's and the gain; writes one row per kind\n"
      "(docs/tuning_tables.md) into --out after every configuration.\n"
      "Defaults: B=2 H=16 N=8192, D=64,128, bf16, non-causal, forward and backward,\n"
      "top 12, median of 7 after 2 warm-up calls, 2 input sets.");
  declare_dims_options(a);
  a.option("kinds", "K,K",
           "forward, backward (query then key/value), backward_query,\n"
           "                          backward_key_value, backward_atomic");
  a.option("dtype", "T,T", "bf16 (default), f16, or both: bf16,f16");
  a.option("causal", "0|1|both", "causal mask (default 0)");
  a.option("batch", "B", "batch size of the timed problem");
  a.option("heads", "H", "query heads (= key/value heads)");
  a.option("seq", "N", "sequence length of queries and keys");
  a.option("seq-bucket", "MIN,MAX",
           "max(seq_q, seq_kv) range the rows claim\n"
           "                          (default N/2+1,N; MAX 0: no bound)");
  a.option("top", "N", "candidates timed per kind besides the default (default 12)");
  a.option("repeats", "R", "timed calls per candidate (default 7)");
  a.option("warmup", "W", "untimed calls first (default 2)");
  a.option("input-sets", "S", "input sets rotated between calls (default 2)");
  a.option("threads", "N", "compile threads (default: all)");
  a.option("out", "PATH",
           "table to write (default: the user table\n"
           "                          <cache dir>/tuning/<sm90>.json)");
  a.option("merge", "PATH",
           "start from this table's rows (e.g. data/tuning/sm90.json);\n"
           "                          written to --out, or back to PATH");
  a.option("time-limit", "MIN", "start no configuration that would end after MIN minutes");
  a.flag("resume",
         "keep the rows --out already holds (on top of --merge's) and skip\n"
         "                          configurations whose rows (every kind asked for) are\n"
         "                          there, e.g. after --time-limit stopped a run");
  a.flag("pipelines-only",
         "no search: time the table's tuning (--merge's, else the default)\n"
         "                          with each way of copying its traversed tiles (without\n"
         "                          a producer warpgroup; with one copying by TMA, or by\n"
         "                          cp.async where TMA cannot read the rows; the forward's\n"
         "                          stages), and the default");
  a.flag("list-timed", "under each kind, every candidate timed (ms, TFLOP/s), fastest first");
  a.flag("dry-run",
         "prune and rank only (no GPU): counts, top candidates, time estimate;\n"
         "                          the kernels compiled land in the disk cache");
  a.option("arch", "SM", "arch of --dry-run (default sm_90a)");
  return a;
}

Settings settings_from(const Arguments& a) {
  Settings s;
  s.dims = dims_from(a, kDims, kMaxCommandDim);
  for (const std::string& name : a.choice_list("dtype", {"bf16"}, {"bf16", "f16"}))
    s.dtypes.push_back(dtype_named(name));
  const std::string causal = a.choice("causal", "0", {"0", "1", "both"});
  if (causal != "1") s.causal.push_back(false);
  if (causal != "0") s.causal.push_back(true);
  s.kind_names =
      a.choice_list("kinds", {"forward", "backward"}, tunable_kind_names());
  s.tuner.kinds = kinds_named(s.kind_names);
  s.base.batch = a.integer("batch", kBatch, 1);
  s.base.heads_q = s.base.heads_kv = a.integer("heads", kHeads, 1);
  s.base.seq_q = s.base.seq_kv = a.integer("seq", kSeq, 1);
  s.seq_min = s.base.seq_q / 2 + 1;
  s.seq_max = s.base.seq_q;
  if (a.given("seq-bucket")) {
    const std::vector<std::int64_t> bucket =
        a.integer_list("seq-bucket", {}, 0, std::int64_t{1} << 40);
    if (bucket.size() != 2 || bucket[0] < 1 || (bucket[1] != 0 && bucket[1] < bucket[0]))
      throw UsageError(
          "flashgen tune: --seq-bucket expects MIN,MAX with 1 <= MIN <= MAX or MAX = 0");
    s.seq_min = bucket[0];
    s.seq_max = bucket[1];
  }
  s.tuner.top = static_cast<int>(a.integer("top", kTop, 0, 1000));
  s.tuner.pipelines_only = a.given("pipelines-only");
  if (s.tuner.pipelines_only) s.tuner.top = 0;
  s.timing.repeats = static_cast<int>(a.integer("repeats", kRepeats, 1, 1 << 16));
  s.timing.warmup = static_cast<int>(a.integer("warmup", kWarmup, 0, 1 << 16));
  s.timing.quick_repeats = std::min(s.timing.quick_repeats, s.timing.repeats);
  s.input_sets = static_cast<int>(a.integer("input-sets", kInputSets, 1, 64));
  s.tuner.compile_threads = static_cast<int>(a.integer("threads", 0, 0, 1 << 12));
  s.merge_path = a.text("merge", "");
  s.out_path = a.text("out", s.merge_path);
  s.time_limit_s = 60 * a.number("time-limit", 1e9, 0.0);
  if (!a.given("time-limit")) s.time_limit_s = 0;
  s.resume = a.given("resume");
  s.list_timed = a.given("list-timed");
  s.dry_run = a.given("dry-run");
  s.arch = a.text("arch", "sm_90a");
  return s;
}

std::vector<Configuration> configurations(const Settings& s) {
  std::vector<Configuration> list;
  for (DType dtype : s.dtypes)
    for (std::int64_t dim : s.dims)
      for (bool causal : s.causal) list.push_back({dtype, dim, causal});
  return list;
}

Problem problem_of(const Settings& s, const Configuration& c) {
  Problem p;
  p.batch = s.base.batch;
  p.heads_q = s.base.heads_q;
  p.heads_kv = s.base.heads_kv;
  p.seq_q = s.base.seq_q;
  p.seq_kv = s.base.seq_kv;
  p.dim_qk = p.dim_v = c.dim;
  p.dtype = c.dtype;
  p.causal = c.causal;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
  return p;
}

// ---- Planning: rough seconds, for the time estimate and the progress bar
// (whose time left is a ratio, so only the proportions need to be right). ----

int compile_threads(const Settings& s) {
  if (s.tuner.compile_threads > 0) return s.tuner.compile_threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// One candidate of a kind: its timed calls at the planning rate.
double candidate_seconds(const Settings& s, const Problem& p, KernelKind kind) {
  const bool backward = is_backward_kind(kind);
  const double flops = backward ? backward_flops(p) : forward_flops(p);
  const double rate = (backward ? kPlannedBackwardTflops : kPlannedForwardTflops) * 1e12;
  return (s.timing.warmup + s.timing.repeats) * flops / rate;
}

// Pruning one kind: about kPlannedCompilesPerKept kernels per kept candidate.
double pruning_seconds(const Settings& s, double compiles) {
  return compiles * kPlannedCompileSeconds / compile_threads(s);
}

// Candidates a kind times: the top ones, the default, and the confirmation
// (winner and default re-timed each round).
int planned_candidates(const Settings& s) { return s.tuner.top + 1 + 2 * s.tuner.confirm_rounds; }

double planned_kind_seconds(const Settings& s, const Problem& p, KernelKind kind) {
  return pruning_seconds(s, kPlannedCompilesPerKept * (s.tuner.top + 1)) +
         planned_candidates(s) * candidate_seconds(s, p, kind);
}

// ---- The table written. ----

// --merge's rows (else --out's); with --resume, the rows an interrupted run
// already wrote to --out on top.
TuningTable starting_table(const Settings& s, const std::string& table_name) {
  const std::string& from = s.merge_path.empty() ? s.out_path : s.merge_path;
  std::error_code ignored;
  TuningTable table{table_name, {}};
  if (!from.empty() && std::filesystem::exists(from, ignored))
    table = load_tuning_table(from, table_name);
  if (s.resume && from != s.out_path && std::filesystem::exists(s.out_path, ignored))
    merge_rows(table, load_tuning_table(s.out_path, table_name).rows);
  return table;
}

// Whether `table` has this configuration's row for every kind asked for.
bool already_tuned(const Settings& s, const Configuration& c, const TuningTable& table) {
  for (KernelKind kind : s.tuner.kinds) {
    TuningRow key;
    key.kind = kind;
    key.dtype = c.dtype;
    key.dim_qk_min = key.dim_qk_max = key.dim_v_min = key.dim_v_max = static_cast<int>(c.dim);
    key.causal = c.causal;
    key.seq_min = s.seq_min;
    key.seq_max = s.seq_max;
    const bool found = std::any_of(table.rows.begin(), table.rows.end(),
                                   [&](const TuningRow& r) { return r.same_key(key); });
    if (!found) return false;
  }
  return true;
}

std::vector<TuningRow> rows_of(const Settings& s, const Configuration& c,
                               const std::vector<KindResult>& results,
                               const cuda::DeviceInfo& device) {
  std::vector<TuningRow> rows;
  const std::string date = local_date_time().substr(0, 10);
  for (const KindResult& r : results) {
    if (!r.ok() || r.best_ms <= 0) continue;
    TuningRow row;
    row.kind = r.kind;
    row.dtype = c.dtype;
    row.dim_qk_min = row.dim_qk_max = row.dim_v_min = row.dim_v_max = static_cast<int>(c.dim);
    row.causal = c.causal;
    row.seq_min = s.seq_min;
    row.seq_max = s.seq_max;
    row.tuning = r.best;
    row.tflops = r.flops / (r.best_ms * 1e-3) * 1e-12;
    row.default_tflops = r.default_ms > 0 ? r.flops / (r.default_ms * 1e-3) * 1e-12 : 0;
    row.date = date;
    row.driver = device.driver_version;
    row.gpu = device.name;
    row.vec = r.spec.vec;
    rows.push_back(row);
  }
  return rows;
}

// ---- --dry-run ----

int dry_run(const Settings& s) {
  const std::size_t limit = shared_limit_of_arch(s.arch);
  std::printf("flashgen tune --dry-run  arch: %s  shared limit: %zu bytes  top %d\n",
              s.arch.c_str(), limit, s.tuner.top);
  TunerSettings tuner = s.tuner;
  tuner.starting_rows = starting_table(s, table_name_of_arch(s.arch)).rows;
  tuner.shared_limit = limit;
  double gpu_seconds = 0, compile_seconds = 0;
  for (const Configuration& c : configurations(s)) {
    const Problem p = problem_of(s, c);
    // The alignment class of packed tensors from a 256-byte aligned allocation.
    void* const aligned = reinterpret_cast<void*>(std::uintptr_t{1} << 20);
    const TensorView q = TensorView::bshd(aligned, c.dtype, p.batch, p.seq_q, p.heads_q, c.dim);
    std::printf("\n%s\n", c.title().c_str());
    for (KernelKind kind : s.tuner.kinds) {
      KernelSpec spec;
      spec.kind = kind;
      spec.dtype = c.dtype;
      spec.dim_qk = spec.dim_v = static_cast<int>(c.dim);
      spec.causal = c.causal;
      spec.vec = cuda::alignment_class({&q});
      spec.arch = s.arch;
      PruneSettings ps;
      ps.shared_limit = limit;
      ps.top = s.tuner.top;
      ps.threads = s.tuner.compile_threads;
      ps.compile = compile_into_cache();
      ps.problem = {p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_kv};
      ps.keep = tunings_to_keep(tuner, spec, std::max(p.seq_q, p.seq_kv));
      const TuningParams fallback = default_tuning(spec, limit);
      const PruneResult r = prune(spec, fallback, ps);
      std::printf("  %-19s space %3d, pruned %3zu, compiled %3d, kept %2zu; best estimate %s\n",
                  to_string(kind), r.space, r.rejected.size(), r.compiled, r.kept.size(),
                  r.kept.empty() ? "-" : r.kept.front().tuning.to_string().c_str());
      for (const Candidate& k : r.kept)
        std::printf("      %-42s estimate %6.2f ms  %3d registers%s\n",
                    k.tuning.to_string().c_str(), k.estimated_cycles / kPlannedClockGhz * 1e-6,
                    k.resources.registers,
                    k.is_default ? "  (default)" : k.kept_anyway ? "  (the table's)" : "");
      for (const Rejected& x : r.rejected)
        if (x.reason.rfind("spills", 0) == 0 || x.reason.rfind("compile error", 0) == 0)
          std::printf("      %-42s pruned: %s\n", x.tuning.to_string().c_str(), x.reason.c_str());
      const double candidates = double(r.kept.size() + 2 * s.tuner.confirm_rounds);
      gpu_seconds += candidates * candidate_seconds(s, p, kind);
      compile_seconds += pruning_seconds(s, r.compiled);
    }
  }
  std::printf(
      "\nestimated GPU run: %s of timing at %.0f/%.0f TFLOP/s forward/backward (at most:"
      " clearly slower candidates stop early) + %s of compiling on %d threads\n",
      duration_text(gpu_seconds).c_str(), kPlannedForwardTflops, kPlannedBackwardTflops,
      duration_text(compile_seconds).c_str(), compile_threads(s));
  return kExitOk;
}

// ---- The GPU run. ----

int gpu_run(const Settings& s) {
  const cuda::Availability available = cuda::availability();
  if (!available.ok) {
    std::fprintf(stderr, "flashgen tune: the CUDA backend cannot run here: %s\n",
                 available.reason.c_str());
    return kExitRefused;
  }
  if (std::getenv("FLASHGEN_TUNING") != nullptr)
    std::fprintf(stderr,
                 "flashgen tune: note: FLASHGEN_TUNING is set; the tuned kinds ignore it "
                 "while they are measured\n");
  const int ordinal = cuda::current_device();
  const cuda::DeviceInfo& device = cuda::device_info(ordinal);
  const std::string table_name = table_name_of_arch(device.arch());
  Settings settings = s;
  if (settings.out_path.empty()) settings.out_path = user_tuning_table_path(device.arch());
  if (settings.out_path.empty())
    throw UsageError("flashgen tune: no cache directory for the user table; give --out PATH");
  set_device(settings.tuner, ordinal);
  TuningTable table = starting_table(settings, table_name);
  settings.tuner.starting_rows = table.rows;

  std::printf("flashgen tune  device: %s (%s)  driver: %s  NVRTC: %s  date: %s\n",
              device.name.c_str(), device.arch().c_str(), device.driver_version.c_str(),
              cuda::nvrtc_version().c_str(), local_date_time().c_str());
  std::printf(
      "B=%lld H=%lld N=%lld, top %d, median of %d after %d warm-up, %d input sets; "
      "rows for max(seq) in [%lld, %lld] -> %s\n",
      static_cast<long long>(s.base.batch), static_cast<long long>(s.base.heads_q),
      static_cast<long long>(s.base.seq_q), s.tuner.top, s.timing.repeats, s.timing.warmup,
      s.input_sets, static_cast<long long>(s.seq_min), static_cast<long long>(s.seq_max),
      settings.out_path.c_str());
  std::fflush(stdout);

  const std::vector<Configuration> list = configurations(settings);
  double planned = 0;
  for (const Configuration& c : list)
    for (KernelKind kind : s.tuner.kinds)
      planned += planned_kind_seconds(s, problem_of(s, c), kind);
  TuneProgress progress(planned);

  bool any_failed = false;
  std::size_t done = 0;
  double planned_done = 0;  // planned seconds of the configurations done
  for (DType dtype : settings.dtypes) {
    std::int64_t largest = *std::max_element(settings.dims.begin(), settings.dims.end());
    Shape big = settings.base;
    big.dtype = dtype;
    big.dim_qk = big.dim_v = largest;
    const RandomPool pool(dtype, std::min(largest_tensor_elements(big), kPoolElements), kSeed);
    for (std::int64_t dim : settings.dims) {
      std::vector<bool> causal_to_tune;
      for (bool causal : settings.causal) {
        const Configuration c{dtype, dim, causal};
        if (settings.resume && already_tuned(settings, c, table)) {
          for (KernelKind kind : settings.tuner.kinds)
            progress.replan(-planned_kind_seconds(settings, problem_of(settings, c), kind));
          progress.clear();
          std::printf("\n%s: in the table already (--resume)\n", c.title().c_str());
        } else {
          causal_to_tune.push_back(causal);
        }
      }
      if (causal_to_tune.empty()) continue;
      Shape shape = settings.base;
      shape.dtype = dtype;
      shape.dim_qk = shape.dim_v = dim;
      std::vector<Workload> sets;
      for (int i = 0; i < settings.input_sets; ++i)
        sets.emplace_back(shape, MemoryKind::cuda, pool,
                          kSeed * 31 + static_cast<std::uint64_t>(i));
      std::vector<ForwardArgs> forward_args;
      std::vector<BackwardArgs> backward_args;
      for (const Workload& w : sets) {
        forward_args.push_back(w.forward_args());
        backward_args.push_back(w.backward_args());
      }
      const BackwardArgs& b = backward_args[0];
      const int vec = cuda::alignment_class(
          {&b.q, &b.k, &b.v, &b.o, &b.grad_o, &b.grad_q, &b.grad_k, &b.grad_v});
      for (bool causal : causal_to_tune) {
        const Configuration c{dtype, dim, causal};
        const Problem p = problem_of(settings, c);
        // Stop before a configuration that would end past the limit: its
        // planned seconds at the pace of the configurations so far.
        double planned_next = 0;
        for (KernelKind kind : settings.tuner.kinds)
          planned_next += planned_kind_seconds(settings, p, kind);
        const double expected =
            planned_done > 0 ? progress.elapsed_s() / planned_done * planned_next : 0;
        if (settings.time_limit_s > 0 && progress.elapsed_s() + expected > settings.time_limit_s) {
          progress.clear();
          std::printf("\ntime limit: stopped after %zu of %zu configurations; table: %s\n", done,
                      list.size(), settings.out_path.c_str());
          return any_failed ? kExitCheckFailed : kExitOk;
        }
        const Timer timer(forward_args, backward_args, causal, settings.timing);
        const ReferenceCheck reference(dtype, static_cast<int>(dim), static_cast<int>(dim), causal);
        GpuRunner runner(reference, timer);
        TunerProgress events;
        events.pruning_started = [&](KernelKind kind) {
          progress.set_label(c.title() + " " + to_string(kind) + " (compiling)");
        };
        events.kind_started = [&](KernelKind kind, int candidates) {
          progress.replan((candidates - (settings.tuner.top + 1)) *
                          candidate_seconds(settings, p, kind));
          progress.advance(
              pruning_seconds(settings, kPlannedCompilesPerKept * (settings.tuner.top + 1)), 0);
          progress.set_label(c.title() + " " + to_string(kind));
        };
        events.candidate_done = [&](KernelKind kind, const CandidateOutcome&) {
          progress.advance(candidate_seconds(settings, p, kind));
        };
        const std::vector<KindResult> results =
            tune_configuration(p, vec, runner, settings.tuner, events);
        // The confirmation rounds were planned; count them done.
        for (const KindResult& r : results)
          progress.advance(
              2 * settings.tuner.confirm_rounds * candidate_seconds(settings, p, r.kind), 0);
        progress.clear();
        print_configuration(c.title(), results, settings.list_timed);
        for (const KindResult& r : results) any_failed = any_failed || !r.ok();
        merge_rows(table, rows_of(settings, c, results, device));
        write_tuning_table(settings.out_path, table);
        ++done;
        planned_done += planned_next;
      }
    }
  }
  progress.clear();
  reload_tuning_tables();
  std::printf("\n%zu configurations in %s; table: %s (%zu rows)\n", done,
              duration_text(progress.elapsed_s()).c_str(), settings.out_path.c_str(),
              table.rows.size());
  return any_failed ? kExitCheckFailed : kExitOk;
}

}  // namespace

int tune_command(const std::vector<std::string>& words) {
  Arguments arguments = declare();
  if (!arguments.parse(words)) return kExitOk;
  const Settings settings = settings_from(arguments);
  return settings.dry_run ? dry_run(settings) : gpu_run(settings);
}

}  // namespace flashgen::cli
