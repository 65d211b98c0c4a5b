// What `flashgen bench` measured and how it is shown: one fixed-column text
// row per head dimension under a header naming the device, driver, NVRTC and
// date, and the same rows as JSON for plots and peer comparisons.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/problem.hpp"

namespace flashgen::cli {

struct BenchHeader {
  std::string device, driver, nvrtc, date;
  std::string backend;  // "cpu" or "cuda"
  std::string settings;  // "B=2 H=16 Hkv=16 N=8192 bf16 non-causal, median of 20 after 5 warm-up"
  double gemm_tflops = 0;
  bool on_gpu = false;   // TFLOP/s and % of ceiling on a GPU, GFLOP/s on the CPU
  bool backward_atomic = false;  // an extra column pair
  // backward_query and backward_key_value timed alone: two column pairs and
  // two GINSTRS columns.
  bool backward_stages = false;
};

struct BenchRow {
  std::int64_t dim = 0;
  Problem problem;                   // the timed problem
  std::vector<std::string> kernels;  // forward, backward (and atomic) plans
  // Milliseconds; < 0 when not measured.
  double forward_ms = -1, backward_ms = -1, backward_atomic_ms = -1;
  // Host microseconds per call (median; GPU rows only, -1 otherwise).
  double forward_host_us = -1, backward_host_us = -1, backward_atomic_host_us = -1;
  double backward_query_ms = -1, backward_key_value_ms = -1;  // the deterministic stages alone
  std::string error;     // refused or failed: no timings
  bool failed = false;   // wrong results or a run-time failure (not a refusal)
};

void print_header(const BenchHeader& header);
void print_row(const BenchHeader& header, const BenchRow& row);
// Writes {"tool": "flashgen", "device": ..., "rows": [...]} to `path`;
// throws std::runtime_error when the file cannot be written.
void write_json(const std::string& path, const BenchHeader& header,
                const std::vector<BenchRow>& rows);

}  // namespace flashgen::cli
