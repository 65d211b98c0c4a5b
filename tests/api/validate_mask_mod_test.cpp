// The rules of options.mask_mod and options.mask_tensors: each broken one is
// refused with invalid_argument naming the argument and the rule, before any
// output is written; the CUDA backend refuses more arrays than its kernels take.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "host_problem.hpp"

namespace flashgen::testing {
namespace {

class ValidateMaskMod : public ::testing::Test {
 protected:
  HostProblem problem;  // B=2 Sq=5 Skv=7 Hq=4 Hkv=2 Dqk=8 Dv=6 f32
  ForwardArgs args = problem.forward_args();
  BackwardArgs backward_args = problem.backward_args();
  Options options;
  std::vector<std::int32_t> doc = std::vector<std::int32_t>(7, 0);
  std::vector<float> bias = std::vector<float>(4, 0.0f);

  void SetUp() override {
    options.mask_mod = "doc[kv_idx] == doc[q_idx] && bias[h] >= 0.0";
    options.mask_tensors = {MaskTensorView::int32("doc", doc.data(), 7),
                            MaskTensorView::float32("bias", bias.data(), 4)};
  }
  void expect_invalid(const std::vector<std::string>& fragments) {
    expect_refused(args, options, ErrorCode::invalid_argument, fragments);
    expect_refused(backward_args, options, ErrorCode::invalid_argument, fragments);
  }
};

TEST_F(ValidateMaskMod, ValidMaskPlansWithItsCanonicalText) {
  const Plan plan = plan_forward(args, options);
  ASSERT_TRUE(plan.ok) << plan.reason;
  EXPECT_NE(plan.kernels[0].find("mask=((doc[kv_idx] == doc[q_idx]) && (bias[h] >= 0.0f))"),
            std::string::npos)
      << plan.kernels[0];
  EXPECT_TRUE(supports_backward(backward_args, options));
}

TEST_F(ValidateMaskMod, ExpressionErrorsComeFromTheParser) {
  options.mask_mod = "doc[kv_idx] == foo";
  expect_invalid({"mask_mod: unknown name \"foo\" at column 16",
                  "the names are b, h, q_idx, kv_idx and the mask_tensors (doc, bias)"});
  options.mask_mod = "printf(q_idx)";
  expect_invalid({"mask_mod: calls are not allowed (\"printf(\") at column 1"});
}

TEST_F(ValidateMaskMod, TensorNames) {
  options.mask_tensors[0].name = "2doc";
  expect_invalid({"options.mask_tensors[0].name (\"2doc\") must be an identifier"});
  options.mask_tensors[0].name = "q_idx";
  expect_invalid({"options.mask_tensors[\"q_idx\"]: the name is taken"});
  options.mask_tensors[0].name = "float";
  expect_invalid({"options.mask_tensors[\"float\"]: the name is taken"});
  options.mask_tensors[0].name = "bias";
  expect_invalid({"options.mask_tensors[\"bias\"]: the name is given twice"});
}

TEST_F(ValidateMaskMod, TensorDtypeRankAndMemory) {
  options.mask_tensors[1].element = static_cast<MaskElement>(7);
  expect_invalid({"options.mask_tensors[\"bias\"].dtype (7) must be int32 (0) or float32 (1)"});
  options.mask_tensors[1].element = MaskElement::float32;
  options.mask_tensors[1].rank = 2;
  expect_invalid({"options.mask_tensors[\"bias\"].rank (2) must be 1"});
  options.mask_tensors[1].rank = 1;
  options.mask_tensors[1].memory = MemoryKind::cuda;
  expect_invalid({"options.mask_tensors[\"bias\"].memory (cuda) must equal q.memory (host)"});
  options.mask_tensors[1].memory = MemoryKind::host;
  options.mask_tensors[0].data = nullptr;
  expect_invalid({"options.mask_tensors[\"doc\"].data is null"});
  options.mask_tensors[0].data = doc.data();
  options.mask_tensors[0].stride = -1;
  expect_invalid({"options.mask_tensors[\"doc\"].stride[0] (-1) must be >= 0"});
}

TEST_F(ValidateMaskMod, TensorsWithoutExpression) {
  options.mask_mod.clear();
  expect_invalid({"options.mask_tensors are given without options.mask_mod"});
}

TEST_F(ValidateMaskMod, AnOutputOverlappingAMaskTensorIsRefused) {
  options.mask_tensors[1] = MaskTensorView::float32("bias", static_cast<const float*>(args.o.data), 4);
  expect_refused(args, options, ErrorCode::invalid_argument,
                 {"overlaps options.mask_tensors[\"bias\"] in memory"});
}

TEST_F(ValidateMaskMod, TheCudaBackendRefusesMoreArraysThanItsKernelsTake) {
  for (TensorView* t : {&args.q, &args.k, &args.v, &args.o}) t->memory = MemoryKind::cuda;
  args.lse.memory = MemoryKind::cuda;
  for (int i = 0; options.mask_tensors.size() < 9; ++i)
    options.mask_tensors.push_back(
        MaskTensorView::int32("extra" + std::to_string(i), doc.data(), 7));
  for (MaskTensorView& t : options.mask_tensors) t.memory = MemoryKind::cuda;
  expect_refused(args, options, ErrorCode::unsupported,
                 {"mask_tensors with more than 8 arrays: not supported by the CUDA backend yet",
                  "use the CPU backend"});
}

}  // namespace
}  // namespace flashgen::testing
