// The rules of the masks and score modifiers: each broken one is refused
// with invalid_argument and a message naming the argument and the rule; the
// CUDA backend refuses every option it does not run yet by name (unsupported),
// before it looks for a GPU, and the call is never moved to the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "host_problem.hpp"

namespace flashgen::testing {
namespace {

class ValidateScoreOptions : public ::testing::Test {
 protected:
  HostProblem problem;  // B=2 Sq=5 Skv=7 Hq=4 Hkv=2 Dqk=8 Dv=6 f32
  ForwardArgs args = problem.forward_args();
  BackwardArgs backward_args = problem.backward_args();
  Options options;
  std::vector<float> slopes = std::vector<float>(8, 0.5f), sinks = std::vector<float>(4, 0.0f),
                     grad_sinks = std::vector<float>(4, 0.0f);

  void expect_invalid(const std::vector<std::string>& fragments) {
    expect_refused(args, options, ErrorCode::invalid_argument, fragments);
  }
  void expect_backward_invalid(const std::vector<std::string>& fragments) {
    expect_refused(backward_args, options, ErrorCode::invalid_argument, fragments);
  }
};

TEST_F(ValidateScoreOptions, EveryOptionTogetherIsValid) {
  options.causal = true;
  options.causal_alignment = CausalAlignment::top_left;
  options.window_left = 3;
  options.window_right = 0;
  options.softcap = 20.0;
  options.alibi_slopes = HeadVectorView::batch_heads(slopes.data(), 2, 4);
  options.sinks = HeadVectorView::heads(sinks.data(), 4);
  options.grad_sinks = HeadVectorView::heads(grad_sinks.data(), 4);
  const Plan plan = plan_forward(args, options);
  ASSERT_TRUE(plan.ok) << plan.reason;
  EXPECT_NE(plan.kernels[0].find("top_left window=(3,0) softcap=20 alibi sinks"),
            std::string::npos)
      << plan.kernels[0];
  EXPECT_TRUE(supports_backward(backward_args, options)) << plan_backward(backward_args, options).reason;
}

TEST_F(ValidateScoreOptions, NegativeSoftcap) {
  options.softcap = -1.0;
  expect_invalid({"options.softcap (-1) must be finite and >= 0", "0 = off"});
  options.softcap = std::numeric_limits<double>::quiet_NaN();
  expect_invalid({"options.softcap (nan)"});
}

TEST_F(ValidateScoreOptions, WindowBelowMinusOne) {
  options.window_left = -2;
  expect_invalid({"options.window_left (-2) must be >= -1", "-1 = unbounded"});
  options.window_left = 4;
  options.window_right = -7;
  expect_invalid({"options.window_right (-7) must be >= -1"});
}

TEST_F(ValidateScoreOptions, CausalAlignmentOutOfRange) {
  options.causal_alignment = static_cast<CausalAlignment>(2);
  expect_invalid({"options.causal_alignment (2) is not a valid CausalAlignment",
                  "bottom_right = 0", "top_left = 1"});
}

TEST_F(ValidateScoreOptions, AlibiSlopesShapeAndRank) {
  options.alibi_slopes = HeadVectorView::heads(slopes.data(), 3);
  expect_invalid({"options.alibi_slopes.shape[0] (heads_q = 3) must equal q.shape[2] (heads_q = 4)"});
  options.alibi_slopes = HeadVectorView::batch_heads(slopes.data(), 1, 4);
  expect_invalid({"options.alibi_slopes.shape[0] (batch = 1) must equal q.shape[0] (batch = 2)"});
  options.alibi_slopes.rank = 3;
  expect_invalid({"options.alibi_slopes.rank (3) must be 1 ([heads_q]) or 2 ([batch, heads_q])"});
  options.alibi_slopes = HeadVectorView::heads(slopes.data(), 4);
  options.alibi_slopes.stride[0] = -1;
  expect_invalid({"options.alibi_slopes.stride[0] (-1) must be >= 0"});
}

TEST_F(ValidateScoreOptions, SinksShapeRankAndMemory) {
  options.sinks = HeadVectorView::heads(sinks.data(), 5);
  expect_invalid({"options.sinks.shape[0] (heads_q = 5) must equal q.shape[2] (heads_q = 4)"});
  options.sinks = HeadVectorView::batch_heads(sinks.data(), 2, 2);
  expect_invalid({"options.sinks.rank (2) must be 1 ([heads_q])"});
  options.sinks = HeadVectorView::heads(sinks.data(), 4, MemoryKind::cuda);
  expect_invalid({"options.sinks.memory (cuda) must equal q.memory (host)"});
}

TEST_F(ValidateScoreOptions, BackwardNeedsGradSinksWithSinks) {
  options.sinks = HeadVectorView::heads(sinks.data(), 4);
  expect_backward_invalid({"options.grad_sinks is not given", "fp32 [heads_q]"});
  options.grad_sinks = HeadVectorView::heads(grad_sinks.data(), 3);
  expect_backward_invalid({"options.grad_sinks.shape[0] (heads_q = 3)"});
  options.sinks = {};
  options.grad_sinks = HeadVectorView::heads(grad_sinks.data(), 4);
  expect_backward_invalid({"options.grad_sinks is given without options.sinks"});
  // The forward ignores grad_sinks.
  EXPECT_TRUE(supports_forward(args, options));
}

TEST_F(ValidateScoreOptions, GradSinksMustNotOverlapInputs) {
  options.sinks = HeadVectorView::heads(sinks.data(), 4);
  options.grad_sinks = HeadVectorView::heads(sinks.data(), 4);
  expect_backward_invalid({"options.grad_sinks overlaps options.sinks in memory"});
  options.grad_sinks = HeadVectorView::heads(grad_sinks.data(), 4);
  options.grad_sinks.stride[0] = 0;
  expect_backward_invalid({"options.grad_sinks.stride {0} makes distinct elements share memory"});
}

TEST_F(ValidateScoreOptions, NothingThePlannerRefusesIsWritten) {
  options.sinks = HeadVectorView::heads(sinks.data(), 4);
  options.grad_sinks = HeadVectorView::heads(grad_sinks.data(), 3);
  grad_sinks.assign(4, 9.0f);
  EXPECT_THROW(backward(backward_args, options), Error);
  EXPECT_EQ(grad_sinks, std::vector<float>(4, 9.0f));
}

// On CUDA memory each option the kernels do not run yet is refused by name,
// whether or not there is a GPU; the window, top-left causal, the soft cap,
// sinks and ALiBi plan.
TEST_F(ValidateScoreOptions, TheCudaBackendRefusesEachOptionByName) {
  for (TensorView* t : {&args.q, &args.k, &args.v, &args.o}) t->memory = MemoryKind::cuda;
  args.lse.memory = MemoryKind::cuda;
  const auto refused = [&](const Options& with, const char* name) {
    expect_refused(args, with, ErrorCode::unsupported,
                   {std::string(name) + ": not supported by the CUDA backend yet",
                    "use the CPU backend"});
  };
  Options nine_arrays;
  const std::vector<std::int32_t> values(64, 0);
  nine_arrays.mask_mod = "a8[kv_idx] == 0";
  for (int i = 0; i < 9; ++i)
    nine_arrays.mask_tensors.push_back(MaskTensorView::int32(
        "a" + std::to_string(i), values.data(), 64, MemoryKind::cuda));
  refused(nine_arrays, "mask_tensors with more than 8 arrays");
  Options supported;
  supported.causal = true;
  supported.causal_alignment = CausalAlignment::top_left;
  supported.window_left = 16;
  supported.window_right = 3;
  supported.softcap = 30.0;
  supported.sinks = HeadVectorView::heads(sinks.data(), 4, MemoryKind::cuda);
  const Plan with_cap = plan_forward(args, supported);
  EXPECT_EQ(with_cap.reason.find("not supported"), std::string::npos) << with_cap.reason;
  supported.alibi_slopes = HeadVectorView::heads(slopes.data(), 4, MemoryKind::cuda);
  const Plan plan = plan_forward(args, supported);  // ALiBi with the soft cap
  EXPECT_EQ(plan.reason.find("not supported"), std::string::npos) << plan.reason;
}

}  // namespace
}  // namespace flashgen::testing
