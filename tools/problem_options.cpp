#include "problem_options.hpp"

#include <ctime>

#include "cuda/cuda_backend.hpp"

namespace flashgen::cli {

Backend choose_backend(const std::string& name) {
  if (name == "cpu") return Backend::cpu;
  if (name == "cuda") return Backend::cuda;
  return cuda::availability().ok ? Backend::cuda : Backend::cpu;
}

MemoryKind memory_for(Backend backend) {
  return backend == Backend::cuda ? MemoryKind::cuda : MemoryKind::host;
}

DType dtype_named(const std::string& name) {
  if (name == "f16") return DType::f16;
  if (name == "f32") return DType::f32;
  return DType::bf16;
}

std::string local_date_time() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

double flop_rate(double flops, double ms, double unit) {
  return ms > 0 ? flops / (ms * 1e-3) / unit : 0.0;
}

namespace {

constexpr double kInstructionsPerPairConstant = 5.0;  // softmax and bookkeeping per pair

double heads(const Problem& p) {
  return static_cast<double>(p.batch) * static_cast<double>(p.heads_q);
}

double rate(double count, double ms) { return ms > 0 ? count / (ms * 1e-3) / 1e9 : 0; }

// GEMMs per unmasked pair of each pass; the instruction counts charge D per
// GEMM (forward 2D+5, backward_query 3D+5, backward_key_value 4D+5).
constexpr double kForwardGemms = 2, kQueryGemms = 3, kKeyValueGemms = 4;

// Instructions of one pass over all heads.
double instructions(const Problem& p, double gemms) {
  const double d = static_cast<double>(p.dim_qk);
  return heads(p) * (gemms * d + kInstructionsPerPairConstant) * unmasked_pairs(p);
}

}  // namespace

double forward_ginstrs(const Problem& p, double ms) {
  return rate(instructions(p, kForwardGemms), ms);
}

double backward_ginstrs(const Problem& p, double ms) {
  return rate(instructions(p, kQueryGemms) + instructions(p, kKeyValueGemms), ms);
}

double backward_query_flops(const Problem& p) {
  return kQueryGemms / kForwardGemms * forward_flops(p);
}

double backward_key_value_flops(const Problem& p) {
  return kKeyValueGemms / kForwardGemms * forward_flops(p);
}

double backward_query_ginstrs(const Problem& p, double ms) {
  return rate(instructions(p, kQueryGemms), ms);
}

double backward_key_value_ginstrs(const Problem& p, double ms) {
  return rate(instructions(p, kKeyValueGemms), ms);
}

}  // namespace flashgen::cli
