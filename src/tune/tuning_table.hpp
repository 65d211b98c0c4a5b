// Which tuning a kernel runs with, when it is not the heuristic default.
//
// lookup_tuning() answers, in this order:
//   1. a ScopedTuningOverride of the spec's kind (in-process; the tuner's);
//   2. FLASHGEN_TUNING="kind: rows=.. cols=.. head=.. warps=.. cache=..; kind: ..."
//      (for experiments and command-line measurements);
//   3. a table row that contains the problem: same kind, dtype and causal,
//      Dqk and Dv in the row's ranges, max(seq_q, seq_kv) in its bucket. Rows
//      of the user table (<cache_dir>/tuning/<sm90>.json) come before the
//      shipped table's (data/tuning/<sm90>.json, embedded in the library), a
//      narrower row before a wider one;
//   4. the nearest row of the same kind, dtype and causal, if its tuning is
//      valid for the spec (generate() accepts it, its shared memory fits):
//      rows whose dims are all >= the problem's first (a tuning that fits
//      larger dims fits registers at smaller ones), then the smallest distance
//      in log2 of the dims, then of the sequence length; farther rows are not
//      tried;
//   5. nothing: the caller uses default_tuning() (codegen/heuristics.hpp).
// Overrides (1, 2) are used as given; a row (3, 4) is skipped when its
// tuning is not valid for the spec. FLASHGEN_TUNING_TABLES=user ignores the
// shipped table, =off both tables (to measure the heuristic defaults).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "common/problem.hpp"
#include "tune/table_file.hpp"

namespace flashgen {

// shared_limit: bytes of dynamic shared memory a CTA may use on the device
// (DeviceInfo::shared_per_block_optin). Throws Error(invalid_argument) when
// FLASHGEN_TUNING or a table is malformed (the message names the file, row
// and field).
std::optional<TuningParams> lookup_tuning(const KernelSpec& spec, const Problem& p,
                                          std::size_t shared_limit);
// The same with the opt-in shared-memory limit of spec.arch (shared_limit_of_arch).
std::optional<TuningParams> lookup_tuning(const KernelSpec& spec, const Problem& p);

// Bytes of shared memory a block may opt into on an arch, for callers
// without a device at hand: 232448 (227 KiB) from sm_90 on, 166912 (163 KiB)
// on sm_80 and sm_87, 101376 (99 KiB) on the others (sm_86, sm_89).
std::size_t shared_limit_of_arch(const std::string& arch);

// While it lives, every kernel of `kind` (any spec) runs with `tuning`,
// before FLASHGEN_TUNING and the tables. Process-wide: meant for one thread
// that tunes (the tuner, tests); nested overrides of a kind restore the outer
// one when they end.
class ScopedTuningOverride {
 public:
  ScopedTuningOverride(KernelKind kind, const TuningParams& tuning);
  ~ScopedTuningOverride();
  ScopedTuningOverride(const ScopedTuningOverride&) = delete;
  ScopedTuningOverride& operator=(const ScopedTuningOverride&) = delete;

 private:
  KernelKind kind_;
  std::optional<TuningParams> previous_;
};

// ---- The tables in force, for tests and the tuner. ----

// The rows lookup_tuning() searches for one arch. A user row replaces the
// shipped row with the same key; user rows win ties.
struct TuningTableSet {
  std::vector<TuningRow> user;     // from user_path, when the file exists
  std::vector<TuningRow> shipped;  // embedded in the library
  std::string user_path;           // "" when there is no cache directory
};

// Builds a set from parsed tables (the user rows replace shipped rows of the same key).
TuningTableSet make_table_set(std::vector<TuningRow> shipped, std::vector<TuningRow> user,
                              std::string user_path = "");

// How the row of find_tuning was chosen.
struct RowMatch {
  TuningRow row;
  bool from_user = false;
  bool exact = false;  // the row contains the problem (rule 3), else nearest (rule 4)
};

// Rules 3 and 4 above on a given set; seq = max(seq_q, seq_kv).
std::optional<RowMatch> find_row(const TuningTableSet& tables, const KernelSpec& spec,
                                 std::int64_t seq, std::size_t shared_limit);

// The set for spec.arch's table name, loaded once per process (the shipped
// table from the library, the user table from user_tuning_table_path(), as
// FLASHGEN_TUNING_TABLES allows).
std::shared_ptr<const TuningTableSet> tuning_tables(const std::string& arch);
// Forget loaded tables: the next lookup reads them again (after the tuner
// wrote the user table, or a test changed FLASHGEN_CACHE_DIR).
void reload_tuning_tables();
// How many times the tables were reloaded: a memo of lookups keyed by it
// never serves an answer from tables no longer in force.
std::uint64_t tuning_tables_generation();
// Whether an override (1 or 2 above) applies to `kind` now: its answer can
// change between two calls of the same problem.
bool tuning_overridden(KernelKind kind);

// <cache_dir(arch)>/tuning/<table name>.json, "" when there is no cache directory.
std::string user_tuning_table_path(const std::string& arch);
// The text of data/tuning/<name>.json as embedded at build time; nullopt
// when the library ships no table of that name.
std::optional<std::string> shipped_tuning_table_text(const std::string& table_name);

}  // namespace flashgen
