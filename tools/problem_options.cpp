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

double rate(double instructions, double ms) { return ms > 0 ? instructions / (ms * 1e-3) / 1e9 : 0; }

}  // namespace

double forward_ginstrs(const Problem& p, double ms) {
  const double d = static_cast<double>(p.dim_qk);
  return rate(heads(p) * (2 * d + kInstructionsPerPairConstant) * unmasked_pairs(p), ms);
}

double backward_ginstrs(const Problem& p, double ms) {
  const double d = static_cast<double>(p.dim_qk);
  const double per_pair = (3 * d + kInstructionsPerPairConstant) + (4 * d + kInstructionsPerPairConstant);
  return rate(heads(p) * per_pair * unmasked_pairs(p), ms);
}

}  // namespace flashgen::cli
