#include "tune/tuning_table.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <unordered_map>
#include <sstream>
#include <string>
#include <tuple>

#include "codegen/generate.hpp"
#include "cuda/runtime/runtime.hpp"
#include "tune/embedded_tables.hpp"

namespace flashgen {
namespace {

// ---- 1. In-process overrides (ScopedTuningOverride). ----

struct Overrides {
  std::mutex mutex;
  std::map<KernelKind, TuningParams> by_kind;
  std::atomic<int> count{0};  // lets lookups skip the mutex when none is set
};

Overrides& overrides() {
  static Overrides* o = new Overrides();  // leaked on purpose: lookups may run at exit
  return *o;
}

std::optional<TuningParams> scoped_override(KernelKind kind) {
  Overrides& o = overrides();
  if (o.count.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(o.mutex);
  const auto it = o.by_kind.find(kind);
  if (it == o.by_kind.end()) return std::nullopt;
  return it->second;
}

// ---- 2. FLASHGEN_TUNING. ----

// FLASHGEN_TUNING="forward: rows=128 cols=64 head=0 warps=8 cache=none; backward_query: ..."
// forces the tuning of a kernel kind for every problem: for experiments and
// for measuring tuning candidates from the command line.
std::optional<TuningParams> environment_override(KernelKind kind) {
  const char* text = std::getenv("FLASHGEN_TUNING");
  if (text == nullptr) return std::nullopt;
  std::stringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    const auto colon = entry.find(':');
    if (colon == std::string::npos)
      throw Error(
          ErrorCode::invalid_argument,
          "FLASHGEN_TUNING: expected 'kind: tuning' entries separated by ';', got '" + entry + "'");
    std::string name = entry.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name == to_string(kind)) return parse_tuning(entry.substr(colon + 1));
  }
  return std::nullopt;
}

// ---- 3, 4. Table rows. ----

// How far x lies outside [lo, hi], in octaves (0 inside).
double octaves_outside(double x, double lo, double hi) {
  if (x < lo) return std::log2(lo / x);
  if (hi > 0 && x > hi) return std::log2(x / hi);
  return 0.0;
}

// The two 16-bit dtypes share rows: their kernels differ only in the
// conversions, and every f16 row measured apart tuned as its bf16 row did
// (the shipped table held 429 f16 rows, each with its bf16 row's tuning).
// A row of the call's own dtype ranks first (Rank::other_dtype).
bool same_class(const TuningRow& row, const KernelSpec& spec) {
  const bool sixteen_bit = row.dtype != DType::f32 && spec.dtype != DType::f32;
  return row.kind == spec.kind && (row.dtype == spec.dtype || sixteen_bit) &&
         row.causal == spec.causal;
}

// Ordering of candidate rows; smaller is better.
struct Rank {
  int below = 0;  // 1 when some dim of the row is smaller than the problem's
  double dim_distance = 0;
  double seq_distance = 0;
  int other_dtype = 0;  // rows of the call's dtype first (same_class)
  int shipped = 0;      // user rows first
  double width = 0;     // narrower rows first (log2 of their extent)

  auto tie() const {
    return std::tie(below, dim_distance, seq_distance, other_dtype, shipped, width);
  }
  bool operator<(const Rank& o) const { return tie() < o.tie(); }
};

Rank rank_of(const TuningRow& row, bool user, const KernelSpec& spec, std::int64_t seq) {
  Rank r;
  r.below = (row.dim_qk_max < spec.dim_qk || row.dim_v_max < spec.dim_v) ? 1 : 0;
  r.dim_distance = octaves_outside(spec.dim_qk, row.dim_qk_min, row.dim_qk_max) +
                   octaves_outside(spec.dim_v, row.dim_v_min, row.dim_v_max);
  r.seq_distance = octaves_outside(static_cast<double>(seq), static_cast<double>(row.seq_min),
                                   static_cast<double>(row.seq_max));
  r.other_dtype = row.dtype == spec.dtype ? 0 : 1;
  r.shipped = user ? 0 : 1;
  // An unbounded bucket counts as wide as the range of int64.
  const double seq_hi = row.seq_max == 0 ? 9.2e18 : static_cast<double>(row.seq_max);
  r.width = std::log2(double(row.dim_qk_max) / row.dim_qk_min) +
            std::log2(double(row.dim_v_max) / row.dim_v_min) +
            std::log2(seq_hi / static_cast<double>(row.seq_min));
  return r;
}

// ---- Loaded tables per arch. ----

struct LoadedSet {
  std::shared_ptr<const TuningTableSet> tables;
  std::string error;  // a malformed table: every lookup reports it
};

struct TableCache {
  std::mutex mutex;
  std::map<std::string, LoadedSet> by_name;  // by table name, "sm90"
  // What find_row() answered, by spec, sequence length and shared-memory
  // limit: a training loop asks the same few questions every step, and a
  // lookup (ranking ~200 rows) costs several microseconds per kernel.
  std::unordered_map<std::string, std::optional<TuningParams>> answers;
};

// Answers kept before the memo starts over (distinct shapes are few in
// practice; this bounds a process that sweeps many).
constexpr std::size_t kMaxRememberedAnswers = 4096;

TableCache& table_cache() {
  static TableCache* c = new TableCache();  // leaked on purpose: lookups may run at exit
  return *c;
}

// FLASHGEN_TUNING_TABLES: unset or "all" (both tables), "user" (only the
// user table), "off" (none: the heuristic defaults, e.g. to measure them).
struct TableChoice {
  bool shipped = true, user = true;
};

TableChoice table_choice() {
  const char* text = std::getenv("FLASHGEN_TUNING_TABLES");
  const std::string value = text ? text : "all";
  if (value == "all" || value.empty()) return {true, true};
  if (value == "user") return {false, true};
  if (value == "off") return {false, false};
  throw Error(ErrorCode::invalid_argument,
              "FLASHGEN_TUNING_TABLES must be all, user or off; got '" + value + "'");
}

TuningTableSet load_set(const std::string& arch) {
  const std::string name = table_name_of_arch(arch);
  const TableChoice choice = table_choice();
  std::vector<TuningRow> shipped, user;
  if (choice.shipped)
    if (const std::optional<std::string> text = shipped_tuning_table_text(name))
      shipped = parse_tuning_table(*text, "shipped table data/tuning/" + name + ".json", name).rows;
  const std::string path = user_tuning_table_path(arch);
  std::error_code ignored;
  if (choice.user && !path.empty() && std::filesystem::exists(path, ignored))
    user = load_tuning_table(path, name).rows;
  return make_table_set(std::move(shipped), std::move(user), path);
}

}  // namespace

// ---- Public functions. ----

std::size_t shared_limit_of_arch(const std::string& arch) {
  constexpr std::size_t kHopperAndLater = 232448;  // 227 KiB
  constexpr std::size_t kA100 = 166912;            // 163 KiB (sm_80, sm_87)
  constexpr std::size_t kOther = 101376;           // 99 KiB (sm_86, sm_89)
  const std::string name = table_name_of_arch(arch);
  const int cc = std::atoi(name.c_str() + 2);
  if (cc >= 90) return kHopperAndLater;
  if (cc == 80 || cc == 87) return kA100;
  return kOther;
}

ScopedTuningOverride::ScopedTuningOverride(KernelKind kind, const TuningParams& tuning)
    : kind_(kind) {
  Overrides& o = overrides();
  std::lock_guard<std::mutex> lock(o.mutex);
  const auto it = o.by_kind.find(kind);
  if (it != o.by_kind.end()) previous_ = it->second;
  o.by_kind[kind] = tuning;
  o.count.fetch_add(1, std::memory_order_release);
}

ScopedTuningOverride::~ScopedTuningOverride() {
  Overrides& o = overrides();
  std::lock_guard<std::mutex> lock(o.mutex);
  if (previous_)
    o.by_kind[kind_] = *previous_;
  else
    o.by_kind.erase(kind_);
  o.count.fetch_sub(1, std::memory_order_release);
}

TuningTableSet make_table_set(std::vector<TuningRow> shipped, std::vector<TuningRow> user,
                              std::string user_path) {
  TuningTableSet set;
  for (TuningRow& row : shipped) {
    const bool replaced =
        std::any_of(user.begin(), user.end(), [&](const TuningRow& u) { return u.same_key(row); });
    if (!replaced) set.shipped.push_back(std::move(row));
  }
  set.user = std::move(user);
  set.user_path = std::move(user_path);
  return set;
}

std::optional<RowMatch> find_row(const TuningTableSet& tables, const KernelSpec& spec,
                                 std::int64_t seq, std::size_t shared_limit) {
  struct Candidate {
    const TuningRow* row;
    bool user, exact;
    Rank rank;
    int order;  // position in its table: the later of two equal rows wins, as in a merge
  };
  std::vector<Candidate> candidates;
  for (const bool user : {true, false}) {
    const std::vector<TuningRow>& rows = user ? tables.user : tables.shipped;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (!same_class(rows[i], spec)) continue;
      if (spec.vec == 8 && rows[i].vec > 0 && rows[i].vec < 8) continue;  // see TuningRow::vec
      const bool exact =
          rows[i].contains_dims(spec.dim_qk, spec.dim_v) && rows[i].contains_seq(seq);
      candidates.push_back(
          {&rows[i], user, exact, rank_of(rows[i], user, spec, seq), static_cast<int>(i)});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.exact != b.exact) return a.exact;
    if (a.rank < b.rank) return true;
    if (b.rank < a.rank) return false;
    return a.order > b.order;
  });
  // Exact rows in order; then only the nearest other row: a tuning measured
  // at other dims stands in for these only when it is valid as it is (one
  // from further away, e.g. a mma.sync row tuned at D = 288 for D = 127 whose
  // own neighbours are wgmma tunings its alignment rules out, is a guess no
  // better than the heuristic).
  for (const Candidate& c : candidates) {
    // A TMA tuning measured on rows of another alignment class does not
    // stand in for rows TMA reads through token-row views (odd D): their
    // tiles are wider, and a shape that fits the aligned head may spill or
    // not compile there (D = 191 with D = 192's three warpgroups); the
    // heuristic sizes them.
    if (spec.vec < 8 && tma_copies(spec) && c.row->tuning.tma && c.row->vec != spec.vec) {
      if (!c.exact) break;
      continue;
    }
    if (tuning_fits(spec, c.row->tuning, shared_limit)) return RowMatch{*c.row, c.user, c.exact};
    if (!c.exact) break;
  }
  return std::nullopt;
}

std::string user_tuning_table_path(const std::string& arch) {
  const std::string dir = cuda::cache_dir(arch);
  if (dir.empty()) return "";
  return (std::filesystem::path(dir) / "tuning" / (table_name_of_arch(arch) + ".json")).string();
}

std::optional<std::string> shipped_tuning_table_text(const std::string& table_name) {
#ifdef FLASHGEN_EMBEDDED_TUNING_TABLES
  for (const EmbeddedTuningTable& table : embedded_tuning_tables())
    if (table_name + ".json" == table.name) return std::string(table.text);
#else
  (void)table_name;
#endif
  return std::nullopt;
}

std::shared_ptr<const TuningTableSet> tuning_tables(const std::string& arch) {
  const std::string name = table_name_of_arch(arch);
  TableCache& cache = table_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto it = cache.by_name.find(name);
  if (it == cache.by_name.end()) {
    LoadedSet loaded;
    try {
      loaded.tables = std::make_shared<const TuningTableSet>(load_set(arch));
    } catch (const Error& e) {
      loaded.error = e.what();
    }
    it = cache.by_name.emplace(name, std::move(loaded)).first;
  }
  if (!it->second.error.empty()) throw Error(ErrorCode::invalid_argument, it->second.error);
  return it->second.tables;
}

namespace {
std::atomic<std::uint64_t>& reload_count() {
  static std::atomic<std::uint64_t> count{0};
  return count;
}
}  // namespace

void reload_tuning_tables() {
  TableCache& cache = table_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.by_name.clear();
  cache.answers.clear();
  reload_count().fetch_add(1, std::memory_order_release);
}

std::uint64_t tuning_tables_generation() { return reload_count().load(std::memory_order_acquire); }

bool tuning_overridden(KernelKind kind) {
  return scoped_override(kind).has_value() || environment_override(kind).has_value();
}

std::optional<TuningParams> lookup_tuning(const KernelSpec& spec, const Problem& p,
                                          std::size_t shared_limit) {
  if (std::optional<TuningParams> t = scoped_override(spec.kind)) return t;
  if (std::optional<TuningParams> t = environment_override(spec.kind)) return t;
  const std::shared_ptr<const TuningTableSet> tables = tuning_tables(spec.arch);
  if (tables->user.empty() && tables->shipped.empty()) return std::nullopt;
  const std::int64_t seq = std::max(p.seq_q, p.seq_kv);
  const std::string key =
      spec.to_string() + " seq=" + std::to_string(seq) + " shared=" + std::to_string(shared_limit);
  TableCache& cache = table_cache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.answers.find(key);
    if (it != cache.answers.end()) return it->second;
  }
  const std::optional<RowMatch> match = find_row(*tables, spec, seq, shared_limit);
  std::optional<TuningParams> answer;
  if (match) answer = match->row.tuning;
  std::lock_guard<std::mutex> lock(cache.mutex);
  // A reload between the lookup and here dropped `tables`: keep the answer
  // only while they are still the ones in force.
  auto loaded = cache.by_name.find(table_name_of_arch(spec.arch));
  if (loaded != cache.by_name.end() && loaded->second.tables == tables) {
    if (cache.answers.size() >= kMaxRememberedAnswers) cache.answers.clear();
    cache.answers.emplace(key, answer);
  }
  return answer;
}

std::optional<TuningParams> lookup_tuning(const KernelSpec& spec, const Problem& p) {
  return lookup_tuning(spec, p, shared_limit_of_arch(spec.arch));
}

}  // namespace flashgen
