// Tuning tables as data: rows of measured winners per (kind, dtype, head
// dimensions, causal, sequence bucket), read from JSON and validated on load
// (every error names the file, the row index and the field), written back one
// row per line with aligned columns. docs/tuning_tables.md documents every
// field; this file is the authority on the rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"

namespace flashgen {

// The version of the file format; a file of another version is refused.
inline constexpr int kTuningTableFormat = 1;

struct TuningRow {
  KernelKind kind =
      KernelKind::forward;    // forward, backward_query, backward_key_value, backward_atomic
  DType dtype = DType::bf16;  // bf16 or f16
  int dim_qk_min = 0, dim_qk_max = 0;  // inclusive range of Dqk
  int dim_v_min = 0, dim_v_max = 0;    // inclusive range of Dv
  bool causal = false;
  // Inclusive bucket of max(seq_q, seq_kv); seq_max == 0: no upper bound.
  std::int64_t seq_min = 1, seq_max = 0;
  TuningParams tuning;
  double tflops = 0;          // measured with this tuning (see the doc for backward kinds)
  double default_tflops = 0;  // optional: the heuristic default's in the same run; 0 = absent
  std::string date;           // "2026-12-03" (time of day optional)
  std::string driver;         // CUDA driver version of the measurement, "13.0"
  std::string gpu;            // device name, "NVIDIA H200"
  std::string note;           // optional free text
  // Optional: the alignment class of the rows the tuning was measured on
  // (1, 2, 4 or 8 as in KernelSpec::vec); 0 = not recorded. A row measured on
  // rows not 16-byte aligned never stands in for 16-byte aligned problems,
  // whose kernels have a copy path (TMA) it could not measure.
  int vec = 0;

  // Kind, dtype, both dim ranges, causal and the sequence bucket: two rows
  // with the same key describe the same problems (the later one wins a merge).
  bool same_key(const TuningRow& other) const;
  bool contains_dims(int dim_qk, int dim_v) const;
  bool contains_seq(std::int64_t seq) const;
};

struct TuningTable {
  std::string arch;  // table name, "sm90" (see table_name_of_arch)
  std::vector<TuningRow> rows;
};

// "sm_90a" -> "sm90", "sm_80" -> "sm80": tables are per compute capability;
// the feature suffix does not change what is fastest.
std::string table_name_of_arch(const std::string& arch);

// Parses and validates a table. `source` names the file in messages;
// `expected_arch` ("" = any) must equal the table's "arch". Throws
// Error(invalid_argument) "<source>: rows[3].dim_qk_max: ..." on the first
// violation.
TuningTable parse_tuning_table(const std::string& json_text, const std::string& source,
                               const std::string& expected_arch);
// Reads `path` and parses it; a missing or unreadable file is an error too.
TuningTable load_tuning_table(const std::string& path, const std::string& expected_arch);

// The file text: the header fields, then one row per line with aligned
// columns (rows in canonical order: kind, dtype, causal, dims, sequence).
std::string tuning_table_json(const TuningTable& table);
// Writes the text to a temporary file beside `path` and renames it over
// `path` (creating parent directories), so a reader never sees half a table.
void write_tuning_table(const std::string& path, const TuningTable& table);

// Rows of `rows` replace rows of `table` with the same key; the others are
// appended; the result is sorted in canonical order.
void merge_rows(TuningTable& table, const std::vector<TuningRow>& rows);

// Tunable kinds by name ("forward", ...); throws Error(invalid_argument)
// for any other name, including the untuned backward_prepare/convert_grad_q.
KernelKind tunable_kind_named(const std::string& name);

}  // namespace flashgen
