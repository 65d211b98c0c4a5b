// The tuner for one (dtype, head dims, causal) configuration on the GPU:
// per kernel kind, prune the search space (tune/search_space.hpp), check
// every kept candidate on a small problem against the fp64 reference (a
// wrong one is dropped and reported), time the rest on the caller's problem
// and keep the fastest. Kinds run in this order:
//   forward;
//   backward_query, with backward_key_value held at its default;
//   backward_key_value, with backward_query held at its winner;
//   backward_atomic (the non-deterministic backward).
// The default tuning is always timed. A winner replaces it only when a
// confirmation (both re-timed, alternating) finds it faster by more than
// kMinimumGain; otherwise the default is the winner: tuning never makes a
// configuration slower than the heuristic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "common/problem.hpp"
#include "tune/cost_model.hpp"
#include "tune/measure.hpp"
#include "tune/search_space.hpp"
#include "tune/table_file.hpp"

namespace flashgen {

// Fraction by which a winner must beat the default in the confirmation.
inline constexpr double kMinimumGain = 0.01;

struct TunerSettings {
  std::vector<KernelKind> kinds;  // in the order above
  int top = 12;                   // candidates timed per kind besides the default
  int compile_threads = 0;        // 0: hardware threads
  int confirm_rounds = 2;         // alternating re-timings of winner and default
  // The device (device_settings() fills these from a CUDA device).
  std::string arch = "sm_90a";
  std::size_t shared_limit = 232448;  // opt-in bytes per block
  CostDevice cost_device;
  CompileFunction compile;  // empty: compile_without_device()
  // The rows of the table being extended: the tuning they give each spec
  // (its exact row, else the nearest row that applies, as lookup_tuning()
  // finds it) is timed with the candidates, so a new row never records a
  // tuning slower than the one the table already chose.
  std::vector<TuningRow> starting_rows;
  // No search: time only the starting table's tuning (else the default)
  // with the other ways of copying its traversed tiles (pipeline_variants()),
  // and the default. Adopts a new copy path into a table without re-tuning
  // its shapes.
  bool pipelines_only = false;
};

// The tuning `rows` give the spec (its exact row, else the nearest row that
// applies: find_row()), if any; seq = max(seq_q, seq_kv).
std::optional<TuningParams> table_choice(const std::vector<TuningRow>& rows,
                                         const KernelSpec& spec, std::int64_t seq,
                                         std::size_t shared_limit);

// The tunings timed with the candidates whatever their rank
// (PruneSettings::keep): the starting table's choice; with pipelines_only,
// that choice (else the default) in each of its pipeline variants.
std::vector<TuningParams> tunings_to_keep(const TunerSettings& settings, const KernelSpec& spec,
                                          std::int64_t seq);

// arch, shared_limit, cost_device and compile (compile_and_load) of a CUDA device.
void set_device(TunerSettings& settings, int ordinal);

// What happened to one candidate.
struct CandidateOutcome {
  TuningParams tuning;
  bool is_default = false;
  double ms = -1;        // median; < 0 when not timed
  bool cut = false;      // timed only briefly (clearly slower)
  std::string rejected;  // why it was dropped ("" when timed)
};

struct KindResult {
  KernelKind kind = KernelKind::forward;
  KernelSpec spec;  // the spec that was tuned (vec of the timed inputs)
  TuningParams default_tuning, best;
  double default_ms = -1, best_ms = -1;  // of the call (see measure.hpp)
  double flops = 0;                      // of the timed call
  std::vector<CandidateOutcome> outcomes;
  std::vector<Rejected> pruned;  // dropped before timing, with reasons
  int space = 0, compiled = 0;
  std::string error;  // the kind could not be tuned (e.g. the default failed)
  bool ok() const { return error.empty(); }
};

// Progress: called when a kind's pruning (compiling) starts, when its timing
// starts (with the number of candidates it will time) and after each candidate.
struct TunerProgress {
  std::function<void(KernelKind kind)> pruning_started;
  std::function<void(KernelKind kind, int candidates)> kind_started;
  std::function<void(KernelKind kind, const CandidateOutcome& outcome)> candidate_done;
};

// One configuration: the timed problem `p` (its dims, dtype and causal are
// the configuration; its shape ranks candidates), run by `runner`; `vec` is
// the alignment class of its tensors (cuda::alignment_class), which the
// tuned specs carry.
std::vector<KindResult> tune_configuration(const Problem& p, int vec, CandidateRunner& runner,
                                           const TunerSettings& settings,
                                           const TunerProgress& progress = {});

// The names `flashgen tune --kinds` takes: forward, backward (query then
// key/value), backward_query, backward_key_value, backward_atomic.
const std::vector<std::string>& tunable_kind_names();

// Kernel kinds of `flashgen tune --kinds` names (tunable_kind_names()).
std::vector<KernelKind> kinds_named(const std::vector<std::string>& names);

}  // namespace flashgen
