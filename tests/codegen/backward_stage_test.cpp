// cuda::backward_stage refuses, before touching a device, what it cannot run:
// kernels outside the deterministic backward, and a missing or short
// workspace (Dterm must outlive the call to reach backward_key_value).
#include <gtest/gtest.h>

#include <string>

#include "cuda/cuda_backend.hpp"

namespace flashgen::cuda {
namespace {

Problem problem() {
  Problem p;
  p.batch = 2;
  p.seq_q = p.seq_kv = 100;
  p.heads_q = p.heads_kv = 3;
  p.dim_qk = p.dim_v = 64;
  p.scale = 0.125;
  return p;
}

void expect_invalid(const BackwardArgs& args, KernelKind stage, const std::string& says) {
  try {
    backward_stage(problem(), args, nullptr, stage);
    ADD_FAILURE() << "backward_stage accepted " << to_string(stage);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(BackwardStage, OnlyTheDeterministicKernels) {
  BackwardArgs args;
  for (KernelKind kind : {KernelKind::forward, KernelKind::backward_atomic,
                          KernelKind::backward_prepare, KernelKind::convert_grad_q})
    expect_invalid(args, kind, "deterministic backward");
}

TEST(BackwardStage, NeedsTheCallersWorkspace) {
  BackwardArgs args;
  expect_invalid(args, KernelKind::backward_key_value, "workspace");
  char small[16];
  args.workspace = small;
  args.workspace_bytes = sizeof(small);
  expect_invalid(args, KernelKind::backward_query, "backward_workspace_bytes()");
}

}  // namespace
}  // namespace flashgen::cuda
