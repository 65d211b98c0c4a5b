#include "tune/tuner.hpp"

#include <algorithm>
#include <memory>
#include <optional>

#include "codegen/heuristics.hpp"
#include "codegen/forward_schedule.hpp"
#include "tune/table_file.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen {
namespace {

struct Context {
  const Problem& problem;
  int vec;
  CandidateRunner& runner;
  const TunerSettings& settings;
  const TunerProgress& progress;
  PruneSettings prune;
};

KernelSpec spec_of(const Context& c, KernelKind kind) {
  KernelSpec spec;
  spec.kind = kind;
  spec.dtype = c.problem.dtype;
  spec.dim_qk = static_cast<int>(c.problem.dim_qk);
  spec.dim_v = static_cast<int>(c.problem.dim_v);
  spec.causal = c.problem.causal;
  spec.vec = c.vec;
  spec.arch = c.settings.arch;
  return spec;
}

TuningParams default_of(const Context& c, KernelKind kind) {
  return default_tuning(spec_of(c, kind), c.settings.shared_limit);
}

// What a call runs where a table row holds `t` (tuning_for): the forward's
// tile walk where it is expected to win and its warpgroups' turns, so that
// a row is timed as it will run.
TuningParams as_run(const Context& c, KernelKind kind, const TuningParams& t) {
  return scheduled_as_run(spec_of(c, kind), c.problem, t, c.settings.shared_limit);
}

// Checks one candidate on the small problem, then times it (unless wrong).
CandidateOutcome measure_candidate(const Context& c, KernelKind kind, const Candidate& candidate,
                                   double best_ms) {
  CandidateOutcome out;
  out.tuning = candidate.tuning;
  out.is_default = candidate.is_default;
  const ScopedTuningOverride forced(kind, as_run(c, kind, candidate.tuning));
  const std::string failure = c.runner.check(kind);
  if (!failure.empty()) {
    out.rejected = "wrong results: " + failure;
    return out;
  }
  try {
    const Measurement m = c.runner.time(kind, best_ms);
    out.ms = m.ms;
    out.cut = m.cut;
  } catch (const Error& e) {
    out.rejected = std::string("the timed call failed: ") + e.what();
  }
  return out;
}

// Re-times winner and default alternately; the winner stays only when it is
// faster by more than kMinimumGain.
void confirm(const Context& c, KindResult& r) {
  std::vector<double> best_times, default_times;
  for (int round = 0; round < c.settings.confirm_rounds; ++round) {
    {
      const ScopedTuningOverride forced(r.kind, as_run(c, r.kind, r.best));
      best_times.push_back(c.runner.time_full(r.kind));
    }
    const ScopedTuningOverride forced(r.kind, as_run(c, r.kind, r.default_tuning));
    default_times.push_back(c.runner.time_full(r.kind));
  }
  const double best_ms = median_of(best_times), default_ms = median_of(default_times);
  r.default_ms = default_ms;
  if (best_ms < default_ms * (1.0 - kMinimumGain)) {
    r.best_ms = best_ms;
  } else {
    r.best = r.default_tuning;
    r.best_ms = default_ms;
  }
}

KindResult tune_kind(const Context& c, KernelKind kind) {
  KindResult r;
  r.kind = kind;
  r.spec = spec_of(c, kind);
  r.default_tuning = default_of(c, kind);
  r.best = r.default_tuning;
  r.flops = is_backward_kind(kind) ? backward_flops(c.problem) : forward_flops(c.problem);

  PruneSettings prune_settings = c.prune;
  prune_settings.keep =
      tunings_to_keep(c.settings, r.spec, std::max(c.problem.seq_q, c.problem.seq_kv));
  if (c.settings.pipelines_only) prune_settings.top = 0;  // no search
  PruneResult pruned;
  if (c.progress.pruning_started) c.progress.pruning_started(kind);
  try {
    pruned = prune(r.spec, r.default_tuning, prune_settings);
  } catch (const Error& e) {
    r.error = std::string("pruning failed: ") + e.what();
    return r;
  }
  r.pruned = pruned.rejected;
  r.space = pruned.space;
  r.compiled = pruned.compiled;
  if (c.progress.kind_started) c.progress.kind_started(kind, static_cast<int>(pruned.kept.size()));

  // The default first: it is the baseline of the cut-off and of the gain.
  std::vector<Candidate> order;
  for (const Candidate& k : pruned.kept)
    if (k.is_default)
      order.insert(order.begin(), k);
    else
      order.push_back(k);

  double best_ms = -1;
  for (const Candidate& candidate : order) {
    CandidateOutcome out = measure_candidate(c, kind, candidate, best_ms);
    if (candidate.is_default) {
      if (!out.rejected.empty())
        r.error = "the default tuning " + candidate.tuning.to_string() +
                  " cannot be measured: " + out.rejected;
      r.default_ms = out.ms;
    }
    if (out.rejected.empty() && !out.cut && (best_ms < 0 || out.ms < best_ms)) {
      best_ms = out.ms;
      r.best = out.tuning;
    }
    r.outcomes.push_back(out);
    if (c.progress.candidate_done) c.progress.candidate_done(kind, r.outcomes.back());
    if (!r.ok()) return r;
  }
  r.best_ms = best_ms;
  if (!(r.best == r.default_tuning)) confirm(c, r);
  return r;
}

}  // namespace

std::optional<TuningParams> table_choice(const std::vector<TuningRow>& rows,
                                         const KernelSpec& spec, std::int64_t seq,
                                         std::size_t shared_limit) {
  if (rows.empty()) return std::nullopt;
  const std::optional<RowMatch> match = find_row(make_table_set(rows, {}), spec, seq, shared_limit);
  if (!match) return std::nullopt;
  return match->row.tuning;
}

std::vector<TuningParams> tunings_to_keep(const TunerSettings& settings, const KernelSpec& spec,
                                          std::int64_t seq) {
  const std::optional<TuningParams> chosen =
      table_choice(settings.starting_rows, spec, seq, settings.shared_limit);
  if (settings.pipelines_only)
    return pipeline_variants(spec, chosen.value_or(default_tuning(spec, settings.shared_limit)),
                             settings.shared_limit);
  if (chosen) return {*chosen};
  return {};
}

const std::vector<std::string>& tunable_kind_names() {
  static const std::vector<std::string> names = {"forward", "backward", "backward_query",
                                                 "backward_key_value", "backward_atomic"};
  return names;
}

std::vector<KernelKind> kinds_named(const std::vector<std::string>& names) {
  std::vector<KernelKind> kinds;
  auto has = [&](const char* name) {
    for (const std::string& n : names)
      if (n == name) return true;
    return false;
  };
  if (has("forward")) kinds.push_back(KernelKind::forward);
  // "backward" is both kernels of the deterministic backward; each may be named alone.
  if (has("backward") || has("backward_query")) kinds.push_back(KernelKind::backward_query);
  if (has("backward") || has("backward_key_value")) kinds.push_back(KernelKind::backward_key_value);
  if (has("backward_atomic")) kinds.push_back(KernelKind::backward_atomic);
  const std::vector<std::string>& known = tunable_kind_names();
  for (const std::string& n : names)
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw Error(ErrorCode::invalid_argument, "kinds: '" + n + "' is not one of " + list);
    }
  return kinds;
}

void set_device(TunerSettings& settings, int ordinal) {
  const cuda::DeviceInfo& device = cuda::device_info(ordinal);
  settings.arch = device.arch();
  settings.shared_limit = device.shared_per_block_optin;
  settings.cost_device.sm_count = device.sm_count;
  if (device.shared_per_sm > 0)
    settings.cost_device.shared_per_sm = static_cast<std::int64_t>(device.shared_per_sm);
  if (device.registers_per_sm > 0) settings.cost_device.registers_per_sm = device.registers_per_sm;
  settings.compile = compile_and_load(ordinal);
}

std::vector<KindResult> tune_configuration(const Problem& p, int vec, CandidateRunner& runner,
                                           const TunerSettings& settings,
                                           const TunerProgress& progress) {
  Context c{p, vec, runner, settings, progress, {}};
  c.prune.shared_limit = settings.shared_limit;
  c.prune.top = settings.top;
  c.prune.threads = settings.compile_threads;
  c.prune.problem = {p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_kv};
  c.prune.device = settings.cost_device;
  c.prune.compile = settings.compile;

  std::vector<KindResult> results;
  bool backward_ready = false;
  std::optional<TuningParams> best_query;
  for (KernelKind kind : settings.kinds) {
    if (is_backward_kind(kind) && !backward_ready) {
      runner.prepare_backward();  // O and LSE of every input set
      backward_ready = true;
    }
    // The other kernel of the deterministic backward is held fixed: the
    // default while the query kernel is tuned, then the query winner.
    std::unique_ptr<ScopedTuningOverride> pinned;
    if (kind == KernelKind::backward_query)
      pinned = std::make_unique<ScopedTuningOverride>(
          KernelKind::backward_key_value, default_of(c, KernelKind::backward_key_value));
    if (kind == KernelKind::backward_key_value)
      pinned = std::make_unique<ScopedTuningOverride>(
          KernelKind::backward_query,
          best_query.value_or(default_of(c, KernelKind::backward_query)));
    results.push_back(tune_kind(c, kind));
    if (kind == KernelKind::backward_query && results.back().ok()) best_query = results.back().best;
  }
  return results;
}

}  // namespace flashgen
