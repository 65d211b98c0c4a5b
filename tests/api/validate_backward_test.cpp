// The rules the backward adds: lse is required, gradients have the shape of
// what they differentiate, no output shares memory with anything else.
#include <gtest/gtest.h>

#include "host_problem.hpp"

namespace flashgen::testing {
namespace {

class ValidateBackward : public ::testing::Test {
 protected:
  HostProblem problem;  // B=2 Sq=5 Skv=7 Hq=4 Hkv=2 Dqk=8 Dv=6 f32
  BackwardArgs args = problem.backward_args();
  Options options;

  void expect_invalid(const std::vector<std::string>& fragments) {
    expect_refused(args, options, ErrorCode::invalid_argument, fragments);
  }
};

TEST_F(ValidateBackward, TheFixtureIsValid) {
  const Plan plan = plan_backward(args, options);
  EXPECT_TRUE(plan.ok) << plan.reason;
  EXPECT_EQ(plan.backend, Backend::cpu);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_EQ(backward_workspace_bytes(args, options), 0u);
}

TEST_F(ValidateBackward, NullData) {
  const char* names[] = {"q", "k", "v", "o", "grad_o", "grad_q", "grad_k", "grad_v"};
  TensorView BackwardArgs::*members[] = {&BackwardArgs::q,      &BackwardArgs::k,
                                         &BackwardArgs::v,      &BackwardArgs::o,
                                         &BackwardArgs::grad_o, &BackwardArgs::grad_q,
                                         &BackwardArgs::grad_k, &BackwardArgs::grad_v};
  for (int i = 0; i < 8; ++i) {
    args = problem.backward_args();
    (args.*members[i]).data = nullptr;
    expect_invalid({std::string(names[i]) + ".data is null"});
  }
}

TEST_F(ValidateBackward, LseIsRequired) {
  args.lse.data = nullptr;
  expect_invalid({"lse.data is null"});
}

TEST_F(ValidateBackward, GradientsHaveTheShapeOfWhatTheyDifferentiate) {
  args.grad_o.shape[3] = 5;
  expect_invalid({"grad_o.shape[3] (dim_v = 5) must equal o.shape[3] (dim_v = 6)"});
  args = problem.backward_args();
  args.grad_q.shape[1] = 4;
  expect_invalid({"grad_q.shape[1] (seq_q = 4) must equal q.shape[1] (seq_q = 5)"});
  args = problem.backward_args();
  args.grad_k.shape[2] = 4;
  expect_invalid({"grad_k.shape[2] (heads_kv = 4) must equal k.shape[2] (heads_kv = 2)"});
  args = problem.backward_args();
  args.grad_v.shape[0] = 1;
  expect_invalid({"grad_v.shape[0] (batch = 1) must equal v.shape[0] (batch = 2)"});
}

TEST_F(ValidateBackward, LseShape) {
  args.lse.shape[2] = 4;
  expect_invalid({"lse.shape[2] (seq_q = 4) must equal q.shape[1] (seq_q = 5)"});
}

TEST_F(ValidateBackward, MixedDtypes) {
  args.grad_k.dtype = DType::bf16;
  expect_invalid({"grad_k.dtype (bf16) must equal q.dtype (f32)"});
  args = problem.backward_args();
  args.grad_o.dtype = static_cast<DType>(5);
  expect_invalid({"grad_o.dtype (5) is not a valid DType"});
  args.grad_o.dtype = DType::e4m3;
  expect_invalid({"grad_o.dtype (e4m3) stores a KV cache only"});
}

TEST_F(ValidateBackward, GradientsMustNotAlias) {
  args.grad_q.data = args.q.data;
  expect_invalid({"grad_q overlaps q"});
  args = problem.backward_args();
  args.grad_k.data = args.grad_v.data;
  expect_invalid({"grad_k overlaps grad_v"});
  args = problem.backward_args();
  args.grad_v.data = args.grad_o.data;
  expect_invalid({"grad_v overlaps grad_o"});
  args = problem.backward_args();
  args.grad_q.data = args.lse.data;
  expect_invalid({"grad_q overlaps lse"});
}

TEST_F(ValidateBackward, InputsMayShareMemory) {
  // o as its own upstream gradient reads the same bytes twice: allowed.
  args.grad_o.data = args.o.data;
  EXPECT_TRUE(supports_backward(args, options)) << plan_backward(args, options).reason;
}

TEST_F(ValidateBackward, GradientElementsMustNotShareAddresses) {
  args.grad_k.stride[2] = 0;
  expect_invalid({"grad_k.stride", "distinct elements share memory"});
}

TEST_F(ValidateBackward, MemoryMustAgree) {
  args.grad_v.memory = MemoryKind::cuda;
  expect_invalid({"grad_v.memory (cuda) must equal q.memory (host)"});
}

TEST_F(ValidateBackward, NegativeStride) {
  args.grad_o.stride[0] = -1;
  expect_invalid({"grad_o.stride[0] (-1) must be >= 0"});
}

TEST_F(ValidateBackward, WorkspaceOverlappingATensorIsRefused) {
  // Fake device addresses: validation compares them and never reads them.
  for (TensorView* t : {&args.q, &args.k, &args.v, &args.o, &args.grad_o, &args.grad_q,
                        &args.grad_k, &args.grad_v})
    t->memory = MemoryKind::cuda;
  args.lse.memory = MemoryKind::cuda;
  args.workspace = args.grad_k.data;
  args.workspace_bytes = 64;
  expect_invalid({"grad_k overlaps workspace"});
}

TEST_F(ValidateBackward, WorkspaceBytesNeedsValidArguments) {
  args.grad_q.shape[3] = 1;
  try {
    (void)backward_workspace_bytes(args, options);
    ADD_FAILURE() << "backward_workspace_bytes accepted invalid arguments";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("grad_q.shape[3]"), std::string::npos);
  }
}

}  // namespace
}  // namespace flashgen::testing
