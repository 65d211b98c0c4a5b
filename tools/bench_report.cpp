#include "bench_report.hpp"

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "flashgen/flashgen.hpp"
#include "problem_options.hpp"

namespace flashgen::cli {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;

double tflops(double flops, double ms) { return flop_rate(flops, ms, kTera); }

// TFLOP/s on a GPU, GFLOP/s on the CPU (where TFLOP/s would print zeros).
double shown_rate(const BenchHeader& h, double flops, double ms) {
  return flop_rate(flops, ms, h.on_gpu ? kTera : kGiga);
}

std::string percent_of_ceiling(const BenchHeader& h, double flops, double ms) {
  if (!h.on_gpu || h.gemm_tflops <= 0) return "-";
  char text[16];
  std::snprintf(text, sizeof(text), "%.1f", 100.0 * tflops(flops, ms) / h.gemm_tflops);
  return text;
}

void print_time_columns(const BenchHeader& h, double flops, double ms, bool with_percent) {
  if (ms < 0) {
    std::printf(" %9s %11s", "-", "-");
    if (with_percent) std::printf(" %6s", "-");
    return;
  }
  std::printf(" %9.3f %11.2f", ms, shown_rate(h, flops, ms));
  if (with_percent) std::printf(" %6s", percent_of_ceiling(h, flops, ms).c_str());
}

// One GINSTRS column; "-" where the time was not measured (ms < 0).
void print_ginstrs(double ginstrs, double ms) {
  if (ms >= 0)
    std::printf(" %12.1f", ginstrs);
  else
    std::printf(" %12s", "-");
}

}  // namespace

void print_header(const BenchHeader& h) {
  std::printf("flashgen bench  device: %s  driver: %s  NVRTC: %s  date: %s\n", h.device.c_str(),
              h.driver.c_str(), h.nvrtc.c_str(), h.date.c_str());
  std::printf("backend: %s  %s", h.backend.c_str(), h.settings.c_str());
  if (h.on_gpu) std::printf("  ceiling: %.0f TFLOP/s (bf16 GEMM)", h.gemm_tflops);
  std::printf("\n");
  const std::string unit = h.on_gpu ? "TFLOP/s" : "GFLOP/s";
  std::printf("%5s %9s %11s %6s %9s %11s %6s", "D", "fwd ms", ("fwd " + unit).c_str(), "fwd %",
              "bwd ms", ("bwd " + unit).c_str(), "bwd %");
  if (h.backward_atomic) std::printf(" %9s %11s", "atomic ms", ("atm " + unit).c_str());
  if (h.backward_stages)
    std::printf(" %9s %11s %9s %11s", "bq ms", ("bq " + unit).c_str(), "bkv ms",
                ("bkv " + unit).c_str());
  std::printf(" %12s %12s", "fwd GINSTRS", "bwd GINSTRS");
  if (h.backward_stages) std::printf(" %12s %12s", "bq GINSTRS", "bkv GINSTRS");
  std::printf("\n");
  std::fflush(stdout);
}

void print_row(const BenchHeader& h, const BenchRow& row) {
  std::printf("%5lld", static_cast<long long>(row.dim));
  if (!row.error.empty()) {
    std::printf("  %s: %s\n", row.failed ? "FAILED" : "refused", row.error.c_str());
    std::fflush(stdout);
    return;
  }
  const Problem& p = row.problem;
  const double fwd_flops = forward_flops(p);
  const double bwd_flops = backward_flops(p);
  print_time_columns(h, fwd_flops, row.forward_ms, true);
  print_time_columns(h, bwd_flops, row.backward_ms, true);
  if (h.backward_atomic) print_time_columns(h, bwd_flops, row.backward_atomic_ms, false);
  if (h.backward_stages) {
    print_time_columns(h, backward_query_flops(p), row.backward_query_ms, false);
    print_time_columns(h, backward_key_value_flops(p), row.backward_key_value_ms, false);
  }
  print_ginstrs(forward_ginstrs(p, row.forward_ms), row.forward_ms);
  print_ginstrs(backward_ginstrs(p, row.backward_ms), row.backward_ms);
  if (h.backward_stages) {
    print_ginstrs(backward_query_ginstrs(p, row.backward_query_ms), row.backward_query_ms);
    print_ginstrs(backward_key_value_ginstrs(p, row.backward_key_value_ms),
                  row.backward_key_value_ms);
  }
  std::printf("\n");
  std::fflush(stdout);
}

void write_json(const std::string& path, const BenchHeader& h, const std::vector<BenchRow>& rows) {
  nlohmann::json out;
  out["tool"] = "flashgen";
  out["version"] = version();
  out["device"] = h.device;
  out["driver"] = h.driver;
  out["nvrtc"] = h.nvrtc;
  out["date"] = h.date;
  out["gemm_tflops"] = h.gemm_tflops;
  if (h.backward_stages)
    out["backward_stages"] =
        "bq_*: backward_query alone (Dterm, dQ; 3 GEMMs = 1.5 x forward FLOPs, (3D+5)N^2 "
        "instructions per head); bkv_*: backward_key_value alone (dK, dV; 4 GEMMs = 2 x forward "
        "FLOPs, (4D+5)N^2 instructions per head)";
  out["rows"] = nlohmann::json::array();
  for (const BenchRow& row : rows) {
    const Problem& p = row.problem;
    nlohmann::json r;
    r["backend"] = "flashgen";
    r["device_backend"] = h.backend;
    r["D"] = row.dim;
    r["N"] = p.seq_q;
    r["B"] = p.batch;
    r["H"] = p.heads_q;
    r["Hkv"] = p.heads_kv;
    r["causal"] = p.causal;
    r["dtype"] = to_string(p.dtype);
    r["kernels"] = row.kernels;
    if (!row.error.empty()) {
      r["error"] = row.error;
      out["rows"].push_back(r);
      continue;
    }
    const double fwd_flops = forward_flops(p);
    const double bwd_flops = backward_flops(p);
    if (row.forward_ms >= 0) {
      r["fwd_ms"] = row.forward_ms;
      r["fwd_tflops"] = tflops(fwd_flops, row.forward_ms);
      r["fwd_ginstrs"] = forward_ginstrs(p, row.forward_ms);
    }
    if (row.backward_ms >= 0) {
      r["bwd_ms"] = row.backward_ms;
      r["bwd_tflops"] = tflops(bwd_flops, row.backward_ms);
      r["bwd_ginstrs"] = backward_ginstrs(p, row.backward_ms);
    }
    if (row.backward_atomic_ms >= 0) {
      r["bwd_atomic_ms"] = row.backward_atomic_ms;
      r["bwd_atomic_tflops"] = tflops(bwd_flops, row.backward_atomic_ms);
    }
    // Host time per call: what a small problem costs beyond its kernels.
    for (const auto& [key, value] : {std::pair{"fwd_host_us", row.forward_host_us},
                                     std::pair{"bwd_host_us", row.backward_host_us},
                                     std::pair{"bwd_atomic_host_us", row.backward_atomic_host_us}})
      if (value >= 0) r[key] = value;
    if (row.backward_query_ms >= 0) {
      r["bq_ms"] = row.backward_query_ms;
      r["bq_tflops"] = tflops(backward_query_flops(p), row.backward_query_ms);
      r["bq_ginstrs"] = backward_query_ginstrs(p, row.backward_query_ms);
    }
    if (row.backward_key_value_ms >= 0) {
      r["bkv_ms"] = row.backward_key_value_ms;
      r["bkv_tflops"] = tflops(backward_key_value_flops(p), row.backward_key_value_ms);
      r["bkv_ginstrs"] = backward_key_value_ginstrs(p, row.backward_key_value_ms);
    }
    out["rows"].push_back(r);
  }
  std::ofstream file(path);
  if (!file) throw std::runtime_error("cannot open " + path + " for writing");
  file << out.dump(2) << "\n";
  if (!file) throw std::runtime_error("cannot write " + path);
}

}  // namespace flashgen::cli
