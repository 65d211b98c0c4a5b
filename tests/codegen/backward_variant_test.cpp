// Which backward runs when the caller allows non-determinism, seen through the
// workspace it needs (Dterm alone, or Dterm plus the fp32 dQ accumulator).
#include <gtest/gtest.h>

#include <cstdlib>

#include "cuda/cuda_backend.hpp"

namespace flashgen::cuda {
namespace {

Problem problem_of(std::int64_t dim) {
  Problem p;
  p.batch = 2;
  p.seq_q = p.seq_kv = 100;
  p.heads_q = p.heads_kv = 3;
  p.dim_qk = p.dim_v = dim;
  p.scale = 0.125;
  return p;
}

constexpr std::size_t kDtermBytes = 2560;  // 2·3·100 floats, rounded up to 256 bytes

class BackwardVariant : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("FLASHGEN_BACKWARD"); }
};

TEST_F(BackwardVariant, DeterministicNeverUsesAtomics) {
  setenv("FLASHGEN_BACKWARD", "atomic", 1);
  EXPECT_EQ(backward_workspace_bytes(problem_of(512), true), kDtermBytes);
}

// The atomic backward lost wherever it was measured (prefer_atomic_backward):
// the two-kernel one's workspace at every D, deterministic or not.
TEST_F(BackwardVariant, TwoKernelWhereverMeasured) {
  for (int dim : {128, 385, 512})
    EXPECT_EQ(backward_workspace_bytes(problem_of(dim), false), kDtermBytes) << dim;
}

TEST_F(BackwardVariant, EnvironmentForcesAVariant) {
  setenv("FLASHGEN_BACKWARD", "atomic", 1);
  EXPECT_GT(backward_workspace_bytes(problem_of(64), false), kDtermBytes);
  setenv("FLASHGEN_BACKWARD", "two_kernel", 1);
  EXPECT_EQ(backward_workspace_bytes(problem_of(512), false), kDtermBytes);
  setenv("FLASHGEN_BACKWARD", "fast", 1);
  try {
    backward_workspace_bytes(problem_of(64), false);
    ADD_FAILURE() << "accepted FLASHGEN_BACKWARD=fast";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("FLASHGEN_BACKWARD"), std::string::npos);
  }
}

}  // namespace
}  // namespace flashgen::cuda
