// The planner picks the backend from the memory, names what will run, and is
// the one source of truth for supports_*() and the computing calls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "cuda/cuda_backend.hpp"
#include "host_problem.hpp"

namespace flashgen::testing {
namespace {

ForwardArgs on_device(ForwardArgs args) {
  for (TensorView* t : {&args.q, &args.k, &args.v, &args.o}) t->memory = MemoryKind::cuda;
  args.lse.memory = MemoryKind::cuda;
  return args;
}

TEST(Plan, HostTensorsRunOnTheCpu) {
  HostProblem problem;
  for (Backend backend : {Backend::automatic, Backend::cpu}) {
    Options options;
    options.backend = backend;
    const Plan forward_plan = plan_forward(problem.forward_args(), options);
    ASSERT_TRUE(forward_plan.ok) << forward_plan.reason;
    EXPECT_EQ(forward_plan.backend, Backend::cpu);
    EXPECT_EQ(forward_plan.error, ErrorCode::ok);
    EXPECT_TRUE(forward_plan.reason.empty());
    ASSERT_EQ(forward_plan.kernels.size(), 1u);
    EXPECT_NE(forward_plan.kernels[0].find("cpu.forward"), std::string::npos);
    EXPECT_NE(forward_plan.kernels[0].find("Dqk=8 Dv=6"), std::string::npos);

    const Plan backward_plan = plan_backward(problem.backward_args(), options);
    ASSERT_TRUE(backward_plan.ok) << backward_plan.reason;
    EXPECT_EQ(backward_plan.backend, Backend::cpu);
    ASSERT_EQ(backward_plan.kernels.size(), 1u);
    EXPECT_NE(backward_plan.kernels[0].find("cpu.backward"), std::string::npos);
  }
}

TEST(Plan, CpuThreadsAppearInThePlan) {
  HostProblem problem;
  Options options;
  options.cpu_threads = 3;
  const Plan plan = plan_forward(problem.forward_args(), options);
  ASSERT_TRUE(plan.ok) << plan.reason;
  EXPECT_NE(plan.kernels[0].find("3 threads"), std::string::npos) << plan.kernels[0];
}

TEST(Plan, DeviceTensorsWithoutAGpuAreUnsupportedWithTheReason) {
  const cuda::Availability available = cuda::availability();
  if (available.ok) GTEST_SKIP() << "a GPU is available here";
  HostProblem problem;
  const ForwardArgs args = on_device(problem.forward_args());
  for (Backend backend : {Backend::automatic, Backend::cuda}) {
    Options options;
    options.backend = backend;
    const Plan plan = plan_forward(args, options);
    EXPECT_FALSE(plan.ok);
    EXPECT_EQ(plan.error, ErrorCode::unsupported);
    EXPECT_NE(plan.reason.find(available.reason), std::string::npos) << plan.reason;
    expect_refused(args, options, ErrorCode::unsupported, {"CUDA", available.reason});
  }
}

TEST(Plan, InvalidArgumentsWinOverAMissingGpu) {
  // A broken rule is reported as such even where the backend is missing.
  HostProblem problem;
  ForwardArgs args = on_device(problem.forward_args());
  args.k.shape[3] = 3;
  expect_refused(args, {}, ErrorCode::invalid_argument, {"k.shape[3]"});
}

TEST(Plan, SupportsAgreesWithThePlan) {
  HostProblem problem;
  ForwardArgs good = problem.forward_args();
  ForwardArgs bad = good;
  bad.o.shape[2] = 1;
  for (const ForwardArgs* args : {&good, &bad})
    EXPECT_EQ(supports_forward(*args), plan_forward(*args).ok);
  BackwardArgs good_backward = problem.backward_args();
  BackwardArgs bad_backward = good_backward;
  bad_backward.lse.data = nullptr;
  for (const BackwardArgs* args : {&good_backward, &bad_backward})
    EXPECT_EQ(supports_backward(*args), plan_backward(*args).ok);
  EXPECT_TRUE(supports_forward(good));
  EXPECT_FALSE(supports_forward(bad));
  EXPECT_FALSE(supports_backward(bad_backward));
}

// ---- Empty problems: every output element is still written. ----

constexpr unsigned char kPoison = 0x7f;  // f32 0x7f7f7f7f: a large finite number

bool all_zero(const std::vector<unsigned char>& bytes) {
  for (unsigned char b : bytes)
    if (b != 0) return false;
  return true;
}

TEST(EmptyProblem, NoKeysGivesZeroOutputAndMinusInfinityLse) {
  ProblemShape shape;
  shape.seq_kv = 0;
  for (bool causal : {false, true}) {
    HostProblem problem(shape);
    problem.fill_inputs(1);
    problem.poison_outputs(kPoison);
    Options options;
    options.causal = causal;
    const ForwardArgs args = problem.forward_args();
    const Plan plan = plan_forward(args, options);
    ASSERT_TRUE(plan.ok) << plan.reason;
    EXPECT_NE(plan.kernels.at(0).find("seq_kv = 0"), std::string::npos);
    forward(args, options);
    EXPECT_TRUE(all_zero(problem.o));
    for (float value : problem.lse) EXPECT_EQ(value, -std::numeric_limits<float>::infinity());
  }
}

TEST(EmptyProblem, NoKeysWithoutLseWritesOnlyO) {
  ProblemShape shape;
  shape.seq_kv = 0;
  HostProblem problem(shape);
  problem.poison_outputs(kPoison);
  ForwardArgs args = problem.forward_args();
  args.lse.data = nullptr;
  forward(args);
  EXPECT_TRUE(all_zero(problem.o));
  for (float value : problem.lse) EXPECT_FALSE(std::isinf(value));  // untouched
}

TEST(EmptyProblem, ZerosFollowTheOutputStrides) {
  // o every other element of a buffer twice its size: the gaps stay poisoned.
  ProblemShape shape;
  shape.seq_kv = 0;
  HostProblem problem(shape);
  ForwardArgs args = problem.forward_args();
  args.lse.data = nullptr;
  std::vector<float> wide(static_cast<std::size_t>(args.o.numel()) * 2);
  std::memset(wide.data(), kPoison, wide.size() * sizeof(float));
  args.o.data = wide.data();
  for (int i = 0; i < 4; ++i) args.o.stride[i] *= 2;
  forward(args);
  for (std::size_t i = 0; i < wide.size(); ++i) {
    if (i % 2 == 0)
      EXPECT_EQ(wide[i], 0.0f) << i;
    else
      EXPECT_NE(wide[i], 0.0f) << i;
  }
}

TEST(EmptyProblem, NoQueriesWritesNothingForward) {
  ProblemShape shape;
  shape.seq_q = 0;
  HostProblem problem(shape);
  problem.fill_inputs(2);
  const std::vector<unsigned char> k = problem.k;
  EXPECT_NO_THROW(forward(problem.forward_args()));
  EXPECT_EQ(problem.k, k);
}

TEST(EmptyProblem, NoQueriesGivesZeroKeyAndValueGradients) {
  ProblemShape shape;
  shape.seq_q = 0;
  HostProblem problem(shape);
  problem.fill_inputs(3);
  problem.poison_outputs(kPoison);
  const BackwardArgs args = problem.backward_args();
  ASSERT_TRUE(supports_backward(args)) << plan_backward(args).reason;
  backward(args);
  EXPECT_TRUE(all_zero(problem.grad_k));
  EXPECT_TRUE(all_zero(problem.grad_v));
}

TEST(EmptyProblem, NoKeysGivesZeroQueryGradients) {
  ProblemShape shape;
  shape.seq_kv = 0;
  HostProblem problem(shape);
  problem.fill_inputs(4);
  problem.poison_outputs(kPoison);
  // The forward's statistics of an empty key set.
  for (float& value : problem.lse) value = -std::numeric_limits<float>::infinity();
  const BackwardArgs args = problem.backward_args();
  backward(args);
  EXPECT_TRUE(all_zero(problem.grad_q));
}

}  // namespace
}  // namespace flashgen::testing
