#include "tune/table_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "codegen/generate.hpp"

namespace flashgen {
namespace {

using Json = nlohmann::json;

// Head dimensions and sequence lengths a row may name; far beyond what any
// kernel runs, small enough that no arithmetic on them overflows.
constexpr int kMaxTableDim = 1 << 16;
constexpr std::int64_t kMaxTableSeq = std::int64_t{1} << 40;

const char* const kRequiredFields[] = {
    "kind",    "dtype",   "dim_qk_min", "dim_qk_max", "dim_v_min", "dim_v_max", "causal",
    "seq_min", "seq_max", "tuning",     "tflops",     "date",      "driver",    "gpu"};
const char* const kOptionalFields[] = {"default_tflops", "note", "vec"};
const char* const kHeaderFields[] = {"format", "arch", "rows", "description"};

bool listed(const std::string& name, const char* const* first, const char* const* last) {
  return std::find_if(first, last, [&](const char* f) { return name == f; }) != last;
}

// Reads the fields of one row, each error naming "<source>: rows[i].field".
class RowReader {
 public:
  RowReader(const Json& row, std::string where) : row_(row), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& rule) const {
    throw Error(ErrorCode::invalid_argument, where_ + "." + field + ": " + rule);
  }

  const Json& field(const std::string& name) const {
    const auto it = row_.find(name);
    if (it == row_.end()) fail(name, "missing (every row needs it)");
    return *it;
  }

  std::int64_t integer(const std::string& name, std::int64_t minimum, std::int64_t maximum) const {
    const Json& value = field(name);
    if (!value.is_number_integer()) fail(name, "must be an integer, got " + value.dump());
    const std::int64_t x =
        value.is_number_unsigned()
            ? static_cast<std::int64_t>(std::min<std::uint64_t>(
                  value.get<std::uint64_t>(), std::numeric_limits<std::int64_t>::max()))
            : value.get<std::int64_t>();
    if (x < minimum || x > maximum)
      fail(name, "must be in [" + std::to_string(minimum) + ", " + std::to_string(maximum) +
                     "], got " + std::to_string(x));
    return x;
  }

  bool boolean(const std::string& name) const {
    const Json& value = field(name);
    if (!value.is_boolean()) fail(name, "must be true or false, got " + value.dump());
    return value.get<bool>();
  }

  std::string text(const std::string& name, bool allow_empty) const {
    const Json& value = field(name);
    if (!value.is_string()) fail(name, "must be a string, got " + value.dump());
    std::string s = value.get<std::string>();
    if (!allow_empty && s.empty()) fail(name, "must not be empty");
    return s;
  }

  double number(const std::string& name) const {
    const Json& value = field(name);
    if (!value.is_number()) fail(name, "must be a number, got " + value.dump());
    const double x = value.get<double>();
    if (!(x >= 0)) fail(name, "must be >= 0, got " + value.dump());
    return x;
  }

  bool has(const std::string& name) const { return row_.contains(name); }

 private:
  const Json& row_;
  std::string where_;
};

DType dtype_of(const RowReader& r) {
  const std::string name = r.text("dtype", false);
  if (name == "bf16") return DType::bf16;
  if (name == "f16") return DType::f16;
  r.fail("dtype", "must be \"bf16\" or \"f16\" (the GPU kernels' dtypes), got \"" + name + "\"");
}

// The tuning string, with every rule that does not depend on the device:
// generate()'s rules (checked on the row's smallest dims; they do not depend
// on the dims), the operands a kernel may hold in registers among them.
TuningParams tuning_of(const RowReader& r, const TuningRow& row) {
  const std::string text = r.text("tuning", false);
  TuningParams t;
  try {
    t = parse_tuning(text);
    KernelSpec spec;
    spec.kind = row.kind;
    spec.dtype = row.dtype;
    spec.dim_qk = row.dim_qk_min;
    spec.dim_v = row.dim_v_min;
    spec.causal = row.causal;
    generate(spec, t);
  } catch (const Error& e) {
    r.fail("tuning", e.what());
  }
  return t;
}

TuningRow row_of(const Json& json, const std::string& where) {
  if (!json.is_object()) throw Error(ErrorCode::invalid_argument, where + ": must be an object");
  RowReader r(json, where);
  for (const auto& item : json.items())
    if (!listed(item.key(), std::begin(kRequiredFields), std::end(kRequiredFields)) &&
        !listed(item.key(), std::begin(kOptionalFields), std::end(kOptionalFields)))
      r.fail(item.key(), "unknown field (see docs/tuning_tables.md)");
  TuningRow row;
  try {
    row.kind = tunable_kind_named(r.text("kind", false));
  } catch (const Error& e) {
    r.fail("kind", e.what());
  }
  row.dtype = dtype_of(r);
  row.dim_qk_min = static_cast<int>(r.integer("dim_qk_min", 1, kMaxTableDim));
  row.dim_qk_max = static_cast<int>(r.integer("dim_qk_max", row.dim_qk_min, kMaxTableDim));
  row.dim_v_min = static_cast<int>(r.integer("dim_v_min", 1, kMaxTableDim));
  row.dim_v_max = static_cast<int>(r.integer("dim_v_max", row.dim_v_min, kMaxTableDim));
  row.causal = r.boolean("causal");
  row.seq_min = r.integer("seq_min", 1, kMaxTableSeq);
  row.seq_max = r.integer("seq_max", 0, kMaxTableSeq);
  if (row.seq_max != 0 && row.seq_max < row.seq_min)
    r.fail("seq_max", "must be 0 (no upper bound) or >= seq_min (" + std::to_string(row.seq_min) +
                          "), got " + std::to_string(row.seq_max));
  row.tuning = tuning_of(r, row);
  row.tflops = r.number("tflops");
  row.default_tflops = r.has("default_tflops") ? r.number("default_tflops") : 0.0;
  row.date = r.text("date", false);
  row.driver = r.text("driver", false);
  row.gpu = r.text("gpu", false);
  row.note = r.has("note") ? r.text("note", true) : "";
  if (r.has("vec")) {
    row.vec = static_cast<int>(r.integer("vec", 1, 8));
    if (row.vec != 1 && row.vec != 2 && row.vec != 4 && row.vec != 8)
      r.fail("vec", "must be 1, 2, 4 or 8 (an alignment class), got " + std::to_string(row.vec));
  }
  return row;
}

// Canonical order: what a reader scans for (kind, dtype, causal, dims), then the bucket.
auto order_key(const TuningRow& r) {
  return std::make_tuple(static_cast<int>(r.kind), static_cast<int>(r.dtype), r.causal,
                         r.dim_qk_min, r.dim_qk_max, r.dim_v_min, r.dim_v_max, r.seq_min,
                         r.seq_max);
}

void sort_rows(std::vector<TuningRow>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const TuningRow& a, const TuningRow& b) {
    return order_key(a) < order_key(b);
  });
}

std::string number_text(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", x);
  return text;
}

// One row's cells, '"key": value' in documented order.
std::vector<std::string> cells_of(const TuningRow& r) {
  auto cell = [](const char* key, const std::string& value) {
    return Json(key).dump() + ": " + value;
  };
  auto quoted = [](const std::string& s) { return Json(s).dump(); };
  std::vector<std::string> cells = {cell("kind", quoted(to_string(r.kind))),
                                    cell("dtype", quoted(to_string(r.dtype))),
                                    cell("dim_qk_min", std::to_string(r.dim_qk_min)),
                                    cell("dim_qk_max", std::to_string(r.dim_qk_max)),
                                    cell("dim_v_min", std::to_string(r.dim_v_min)),
                                    cell("dim_v_max", std::to_string(r.dim_v_max)),
                                    cell("causal", r.causal ? "true" : "false"),
                                    cell("seq_min", std::to_string(r.seq_min)),
                                    cell("seq_max", std::to_string(r.seq_max)),
                                    cell("tuning", quoted(r.tuning.to_string())),
                                    cell("tflops", number_text(r.tflops)),
                                    cell("default_tflops", number_text(r.default_tflops)),
                                    cell("date", quoted(r.date)),
                                    cell("driver", quoted(r.driver)),
                                    cell("gpu", quoted(r.gpu))};
  if (!r.note.empty()) cells.push_back(cell("note", quoted(r.note)));
  if (r.vec != 0) cells.push_back(cell("vec", std::to_string(r.vec)));
  return cells;
}

}  // namespace

bool TuningRow::same_key(const TuningRow& o) const {
  return kind == o.kind && dtype == o.dtype && dim_qk_min == o.dim_qk_min &&
         dim_qk_max == o.dim_qk_max && dim_v_min == o.dim_v_min && dim_v_max == o.dim_v_max &&
         causal == o.causal && seq_min == o.seq_min && seq_max == o.seq_max;
}

bool TuningRow::contains_dims(int dim_qk, int dim_v) const {
  return dim_qk >= dim_qk_min && dim_qk <= dim_qk_max && dim_v >= dim_v_min && dim_v <= dim_v_max;
}

bool TuningRow::contains_seq(std::int64_t seq) const {
  return seq >= seq_min && (seq_max == 0 || seq <= seq_max);
}

std::string table_name_of_arch(const std::string& arch) {
  std::string digits;
  for (char c : arch)
    if (c >= '0' && c <= '9') digits += c;
  if (arch.rfind("sm_", 0) != 0 || digits.empty())
    throw Error(ErrorCode::invalid_argument,
                "arch '" + arch + "': expected sm_XY with an optional suffix, e.g. sm_90a");
  return "sm" + digits;
}

KernelKind tunable_kind_named(const std::string& name) {
  for (KernelKind kind : {KernelKind::forward, KernelKind::backward_query,
                          KernelKind::backward_key_value, KernelKind::backward_atomic})
    if (name == to_string(kind)) return kind;
  throw Error(
      ErrorCode::invalid_argument,
      "must be one of forward, backward_query, backward_key_value, backward_atomic; got \"" + name +
          "\"");
}

TuningTable parse_tuning_table(const std::string& json_text, const std::string& source,
                               const std::string& expected_arch) {
  Json json;
  try {
    json = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    throw Error(ErrorCode::invalid_argument, source + ": not valid JSON: " + e.what());
  }
  auto fail = [&](const std::string& field, const std::string& rule) {
    throw Error(ErrorCode::invalid_argument, source + ": " + field + ": " + rule);
  };
  if (!json.is_object()) fail("(top level)", "must be an object {\"format\", \"arch\", \"rows\"}");
  for (const auto& item : json.items())
    if (!listed(item.key(), std::begin(kHeaderFields), std::end(kHeaderFields)))
      fail(item.key(), "unknown field (see docs/tuning_tables.md)");
  if (!json.contains("format") || !json["format"].is_number_integer() ||
      json["format"].get<std::int64_t>() != kTuningTableFormat)
    fail("format", "must be " + std::to_string(kTuningTableFormat) + ", got " +
                       (json.contains("format") ? json["format"].dump() : "nothing"));
  if (!json.contains("arch") || !json["arch"].is_string())
    fail("arch", "must be a string such as \"sm90\"");
  TuningTable table;
  table.arch = json["arch"].get<std::string>();
  if (!expected_arch.empty() && table.arch != expected_arch)
    fail("arch",
         "the table is for \"" + table.arch + "\" but was loaded for \"" + expected_arch + "\"");
  if (!json.contains("rows") || !json["rows"].is_array()) fail("rows", "must be an array");
  const Json& rows = json["rows"];
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string where = source + ": rows[" + std::to_string(i) + "]";
    TuningRow row = row_of(rows[i], where);
    for (std::size_t j = 0; j < table.rows.size(); ++j)
      if (table.rows[j].same_key(row))
        throw Error(ErrorCode::invalid_argument,
                    where + ": same kind, dtype, dims, causal and sequence bucket as rows[" +
                        std::to_string(j) + "]; keep one of them");
    table.rows.push_back(std::move(row));
  }
  return table;
}

TuningTable load_tuning_table(const std::string& path, const std::string& expected_arch) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::invalid_argument, path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_tuning_table(text.str(), path, expected_arch);
}

std::string tuning_table_json(const TuningTable& table) {
  std::vector<TuningRow> rows = table.rows;
  sort_rows(rows);
  std::vector<std::vector<std::string>> cells;
  std::vector<std::size_t> widths;
  for (const TuningRow& r : rows) {
    cells.push_back(cells_of(r));
    for (std::size_t c = 0; c < cells.back().size(); ++c) {
      if (widths.size() <= c) widths.push_back(0);
      widths[c] = std::max(widths[c], cells.back()[c].size());
    }
  }
  std::ostringstream out;
  out << "{\n  \"format\": " << kTuningTableFormat << ",\n  \"arch\": " << Json(table.arch).dump()
      << ",\n  \"rows\": [";
  for (std::size_t r = 0; r < cells.size(); ++r) {
    out << (r == 0 ? "\n    {" : ",\n    {");
    for (std::size_t c = 0; c < cells[r].size(); ++c) {
      const bool last = c + 1 == cells[r].size();
      std::string cell = cells[r][c] + (last ? "" : ",");
      // Pad every column but the last so the rows line up.
      if (!last) cell.resize(widths[c] + 1, ' ');
      out << cell << (last ? "" : " ");
    }
    out << "}";
  }
  out << (cells.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return out.str();
}

void write_tuning_table(const std::string& path, const TuningTable& table) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ignored;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ignored);
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << tuning_table_json(table);
    if (!out.flush()) throw Error(ErrorCode::runtime, temporary + ": cannot be written");
  }
  std::error_code error;
  fs::rename(temporary, target, error);
  if (error) {
    fs::remove(temporary, ignored);
    throw Error(ErrorCode::runtime, path + ": cannot be replaced: " + error.message());
  }
}

void merge_rows(TuningTable& table, const std::vector<TuningRow>& rows) {
  for (const TuningRow& row : rows) {
    auto same = std::find_if(table.rows.begin(), table.rows.end(),
                             [&](const TuningRow& r) { return r.same_key(row); });
    if (same != table.rows.end())
      *same = row;
    else
      table.rows.push_back(row);
  }
  sort_rows(table.rows);
}

}  // namespace flashgen
