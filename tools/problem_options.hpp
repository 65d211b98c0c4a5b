// Command-line pieces `run` and `bench` share: backend choice, dtype names,
// the date for report headers, FLOP and instruction-rate arithmetic.
#pragma once

#include <string>

#include "common/problem.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cli {

// "auto" -> cuda when a GPU can run kernels here, else cpu. An explicit
// "cuda" stays cuda even without a GPU (the planner then says why not).
Backend choose_backend(const std::string& name);
MemoryKind memory_for(Backend backend);

DType dtype_named(const std::string& name);  // "bf16" | "f16" | "f32"

// The largest head dimension the commands accept. The library takes any D;
// the commands cap it so that a mistyped --dim does not allocate tensors and
// an fp64 reference check of tens of gigabytes.
inline constexpr std::int64_t kMaxCommandDim = std::int64_t{1} << 16;
// What the commands' help says of that cap.
inline constexpr const char* kDimRange = "1 to 65536 (the command's cap; the library takes any D)";

std::string local_date_time();  // "2026-12-02 14:03:59"

// FLOP rate in units of 1e12 (TFLOP/s) or 1e9 (GFLOP/s).
double flop_rate(double flops, double ms, double unit);

// The seed benchmark's instruction counts per (batch, head), for comparison
// with metal-flash-attention: forward (2D+5)·pairs, backward (3D+5)·pairs
// (query pass) + (4D+5)·pairs (key/value pass); pairs = unmasked (query, key)
// pairs (N² without a mask). Returned as GINSTRS: instructions / s / 1e9.
double forward_ginstrs(const Problem& p, double ms);
double backward_ginstrs(const Problem& p, double ms);

// The deterministic backward's two kernels timed on their own. FLOPs count
// the GEMMs each runs, by the forward's convention (forward_flops = 2 GEMMs):
// backward_query (Dterm, dQ; S, dP, dQ = 3 GEMMs) 1.5 × forward_flops,
// backward_key_value (dK, dV; S, dP, dV, dK = 4 GEMMs) 2 × forward_flops.
// Together 3.5 ×, above the backward's 2.5 ×: both recompute S and dP.
// GINSTRS split the backward's count: (3D+5)·pairs and (4D+5)·pairs per head.
double backward_query_flops(const Problem& p);
double backward_key_value_flops(const Problem& p);
double backward_query_ginstrs(const Problem& p, double ms);
double backward_key_value_ginstrs(const Problem& p, double ms);

}  // namespace flashgen::cli
