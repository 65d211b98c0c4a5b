// Every rule of the forward's arguments: the code is invalid_argument and the
// message names the argument and the rule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "host_problem.hpp"

namespace flashgen::testing {
namespace {

class ValidateForward : public ::testing::Test {
 protected:
  HostProblem problem;  // B=2 Sq=5 Skv=7 Hq=4 Hkv=2 Dqk=8 Dv=6 f32
  ForwardArgs args = problem.forward_args();
  Options options;

  void expect_invalid(const std::vector<std::string>& fragments) {
    expect_refused(args, options, ErrorCode::invalid_argument, fragments);
  }
};

TEST_F(ValidateForward, TheFixtureIsValid) {
  const Plan plan = plan_forward(args, options);
  EXPECT_TRUE(plan.ok) << plan.reason;
  EXPECT_EQ(plan.backend, Backend::cpu);
}

TEST_F(ValidateForward, NullData) {
  args.q.data = nullptr;
  expect_invalid({"q.data is null"});
  args = problem.forward_args();
  args.k.data = nullptr;
  expect_invalid({"k.data is null"});
  args = problem.forward_args();
  args.v.data = nullptr;
  expect_invalid({"v.data is null"});
  args = problem.forward_args();
  args.o.data = nullptr;
  expect_invalid({"o.data is null"});
}

TEST_F(ValidateForward, LseIsOptional) {
  args.lse.data = nullptr;
  EXPECT_TRUE(supports_forward(args, options));
  // Without data its shape does not matter.
  args.lse.shape[1] = 99;
  EXPECT_TRUE(supports_forward(args, options));
}

TEST_F(ValidateForward, BatchMismatch) {
  args.k.shape[0] = 3;
  expect_invalid({"k.shape[0] (batch = 3) must equal q.shape[0] (batch = 2)"});
  args = problem.forward_args();
  args.v.shape[0] = 1;
  expect_invalid({"v.shape[0] (batch = 1)", "q.shape[0]"});
  args = problem.forward_args();
  args.o.shape[0] = 1;
  expect_invalid({"o.shape[0] (batch = 1)", "q.shape[0]"});
}

TEST_F(ValidateForward, SequenceMismatch) {
  args.v.shape[1] = 6;
  expect_invalid({"v.shape[1] (seq_kv = 6) must equal k.shape[1] (seq_kv = 7)"});
  args = problem.forward_args();
  args.o.shape[1] = 4;
  expect_invalid({"o.shape[1] (seq_q = 4) must equal q.shape[1] (seq_q = 5)"});
}

TEST_F(ValidateForward, HeadsMismatch) {
  args.v.shape[2] = 1;
  expect_invalid({"v.shape[2] (heads_kv = 1) must equal k.shape[2] (heads_kv = 2)"});
  args = problem.forward_args();
  args.o.shape[2] = 2;
  expect_invalid({"o.shape[2] (heads_q = 2) must equal q.shape[2] (heads_q = 4)"});
}

TEST_F(ValidateForward, DimMismatch) {
  args.k.shape[3] = 7;
  expect_invalid({"k.shape[3] (dim_qk = 7) must equal q.shape[3] (dim_qk = 8)"});
  args = problem.forward_args();
  args.o.shape[3] = 8;
  expect_invalid({"o.shape[3] (dim_v = 8) must equal v.shape[3] (dim_v = 6)"});
}

TEST_F(ValidateForward, KeyHeadsMustDivideQueryHeads) {
  args.k.shape[2] = 3;
  args.v.shape[2] = 3;
  expect_invalid({"k.shape[2] (heads_kv = 3) must divide q.shape[2] (heads_q = 4)"});
  args = problem.forward_args();
  args.k.shape[2] = 0;
  args.v.shape[2] = 0;
  expect_invalid({"k.shape[2] (heads_kv = 0) must divide q.shape[2] (heads_q = 4)"});
}

TEST_F(ValidateForward, ExtentsBelowTheirMinimum) {
  args.q.shape[0] = -1;
  expect_invalid({"q.shape[0] (batch = -1) must be >= 0"});
  args = problem.forward_args();
  args.q.shape[2] = -1;
  expect_invalid({"q.shape[2] (heads_q = -1) must be >= 0"});
  args = problem.forward_args();
  args.k.shape[2] = -2;
  expect_invalid({"k.shape[2] (heads_kv = -2) must be >= 0"});
  args = problem.forward_args();
  args.q.shape[3] = 0;
  expect_invalid({"q.shape[3] (dim_qk = 0) must be >= 1"});
  args = problem.forward_args();
  args.v.shape[3] = 0;
  expect_invalid({"v.shape[3] (dim_v = 0) must be >= 1"});
  args = problem.forward_args();
  args.q.shape[1] = -1;
  expect_invalid({"q.shape[1] (seq_q = -1) must be >= 0"});
  args = problem.forward_args();
  args.k.shape[1] = -1;
  expect_invalid({"k.shape[1] (seq_kv = -1) must be >= 0"});
}

TEST_F(ValidateForward, EmptySequencesAreValidAndMayHaveNullData) {
  args.q.shape[1] = 0;
  args.o.shape[1] = 0;
  args.lse.shape[2] = 0;
  args.q.data = nullptr;
  args.o.data = nullptr;
  const Plan plan = plan_forward(args, options);
  EXPECT_TRUE(plan.ok) << plan.reason;

  args = problem.forward_args();
  args.k.shape[1] = 0;
  args.v.shape[1] = 0;
  args.k.data = nullptr;
  args.v.data = nullptr;
  EXPECT_TRUE(supports_forward(args, options)) << plan_forward(args, options).reason;
}

TEST_F(ValidateForward, InvalidDtypeValue) {
  args.q.dtype = static_cast<DType>(7);
  expect_invalid({"q.dtype (7) is not a valid DType"});
  args = problem.forward_args();
  args.o.dtype = static_cast<DType>(-1);
  expect_invalid({"o.dtype (-1) is not a valid DType"});
}

TEST_F(ValidateForward, MixedDtypes) {
  args.k.dtype = DType::f16;
  expect_invalid({"k.dtype (f16) must equal q.dtype (f32)"});
  args = problem.forward_args();
  args.o.dtype = DType::bf16;
  expect_invalid({"o.dtype (bf16) must equal q.dtype (f32)"});
}

TEST_F(ValidateForward, NegativeStrides) {
  args.q.stride[1] = -args.q.stride[1];
  expect_invalid({"q.stride[1]", "must be >= 0"});
  args = problem.forward_args();
  args.o.stride[3] = -1;
  expect_invalid({"o.stride[3] (-1) must be >= 0"});
}

TEST_F(ValidateForward, OutputAliasesAnInput) {
  args.o.data = args.q.data;
  expect_invalid({"o overlaps q", "must not share memory"});
  args = problem.forward_args();
  // o starts inside v: partial overlap of the byte ranges. Its end runs past
  // v's, into whatever tensor the heap put next, which the message may name
  // first.
  args.o.data = static_cast<unsigned char*>(args.v.data) + 4 * sizeof(float);
  expect_invalid({"o overlaps ", "must not share memory"});
}

TEST_F(ValidateForward, LseOverlapsAnotherTensor) {
  args.lse.data = static_cast<float*>(args.o.data);
  expect_invalid({"o overlaps lse"});
  args = problem.forward_args();
  args.lse.data = static_cast<float*>(args.k.data);
  expect_invalid({"lse overlaps k"});
}

TEST_F(ValidateForward, InputsMayShareMemory) {
  // k and v read the same bytes (dim_v == dim_qk here): reading twice is fine.
  ProblemShape shape;
  shape.dim_v = shape.dim_qk;
  HostProblem square(shape);
  ForwardArgs shared = square.forward_args();
  shared.v.data = shared.k.data;
  EXPECT_TRUE(supports_forward(shared, options)) << plan_forward(shared, options).reason;
  // ...and a zero (broadcast) stride on an input is fine too.
  shared.k.stride[0] = 0;
  EXPECT_TRUE(supports_forward(shared, options)) << plan_forward(shared, options).reason;
}

TEST_F(ValidateForward, OutputElementsMustNotShareAddresses) {
  args.o.stride[1] = 0;  // every query row writes the same bytes
  expect_invalid({"o.stride", "distinct elements share memory"});
  args = problem.forward_args();
  args.lse.stride[2] = 0;
  expect_invalid({"lse.stride", "distinct elements share memory"});
}

TEST_F(ValidateForward, ElementOffsetsOverflow) {
  args.q.shape[0] = 3;
  args.q.stride[0] = std::numeric_limits<std::int64_t>::max() / 2 + 1;
  expect_invalid({"q:", "an element offset overflows int64"});
  args = problem.forward_args();
  args.k.shape[1] = std::numeric_limits<std::int64_t>::max() / 4;
  args.v.shape[1] = args.k.shape[1];
  expect_invalid({"k:", "the element count", "overflows int64"});
  args = problem.forward_args();
  // The element offset fits, the byte offset does not.
  args.v.stride[0] = std::numeric_limits<std::int64_t>::max() / 3;
  expect_invalid({"v:", "byte offset", "overflows int64"});
}

TEST_F(ValidateForward, ScaleMustBeFiniteAndNonZero) {
  options.scale = std::nan("");
  expect_invalid({"options.scale (nan) must be finite and non-zero"});
  options.scale = std::numeric_limits<double>::infinity();
  expect_invalid({"options.scale (inf)"});
  options.scale = 0.0;
  expect_invalid({"options.scale (0)"});
  options.scale = -0.5;  // unusual but well defined
  EXPECT_TRUE(supports_forward(args, options));
}

TEST_F(ValidateForward, InvalidOptions) {
  options.backend = static_cast<Backend>(5);
  expect_invalid({"options.backend (5) is not a valid Backend"});
  options = {};
  options.cpu_threads = -1;
  expect_invalid({"options.cpu_threads (-1) must be >= 0"});
}

TEST_F(ValidateForward, MemoryKinds) {
  args.k.memory = static_cast<MemoryKind>(3);
  expect_invalid({"k.memory (3) is not a valid MemoryKind"});
  args = problem.forward_args();
  args.v.memory = MemoryKind::cuda;
  expect_invalid({"v.memory (cuda) must equal q.memory (host)"});
  args = problem.forward_args();
  args.lse.memory = MemoryKind::cuda;
  expect_invalid({"lse.memory (cuda) must equal q.memory (host)"});
}

// Device addresses are never dereferenced by validation, so fake ones test
// the rules of cuda memory on a machine without a GPU.
ForwardArgs on_device(ForwardArgs args, int device) {
  for (TensorView* t : {&args.q, &args.k, &args.v, &args.o}) {
    t->memory = MemoryKind::cuda;
    t->device = device;
  }
  args.lse.memory = MemoryKind::cuda;
  args.lse.device = device;
  return args;
}

TEST_F(ValidateForward, DevicesMustMatch) {
  args = on_device(args, 0);
  args.k.device = 1;
  expect_invalid({"k.device (1) must equal q.device (0)"});
  args = on_device(problem.forward_args(), -1);
  expect_invalid({"q.device (-1) must be >= 0"});
}

TEST_F(ValidateForward, HostDevicesAreIgnored) {
  args.k.device = 3;  // meaningless for host memory
  EXPECT_TRUE(supports_forward(args, options));
}

TEST_F(ValidateForward, ExplicitBackendMustReachTheMemory) {
  options.backend = Backend::cuda;
  expect_invalid({"options.backend (cuda)", "q.memory = host"});
  options.backend = Backend::cpu;
  args = on_device(args, 0);
  expect_invalid({"options.backend (cpu)", "q.memory = cuda"});
}

TEST_F(ValidateForward, LseShapeAndStrides) {
  args.lse.shape[1] = 2;
  expect_invalid({"lse.shape[1] (heads_q = 2) must equal q.shape[2] (heads_q = 4)"});
  args = problem.forward_args();
  args.lse.shape[2] = 6;
  expect_invalid({"lse.shape[2] (seq_q = 6) must equal q.shape[1] (seq_q = 5)"});
  args = problem.forward_args();
  args.lse.shape[0] = 1;
  expect_invalid({"lse.shape[0] (batch = 1) must equal q.shape[0] (batch = 2)"});
  args = problem.forward_args();
  args.lse.stride[1] = -5;
  expect_invalid({"lse.stride[1] (-5) must be >= 0"});
}

TEST_F(ValidateForward, FirstBrokenRuleInFixedOrderIsReported) {
  // Options come first, then each tensor alone, then agreement between them.
  options.scale = 0.0;
  args.k.shape[0] = 3;
  expect_invalid({"options.scale"});
  options = {};
  args.q.data = nullptr;
  expect_invalid({"q.data is null"});
}

}  // namespace
}  // namespace flashgen::testing
