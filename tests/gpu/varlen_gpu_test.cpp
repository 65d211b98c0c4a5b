// forward_varlen / backward_varlen on CUDA tensors against the fp64
// reference run per sequence: cu_seqlens in device memory (the kernels find
// the sequences), or in host memory (the plain kernels per sequence); the
// cases the CPU backend runs, the deterministic and the atomic backward,
// offsets the kernels clamp, and what is refused with a clear error.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "device_storage.hpp"
#include "fails_with.hpp"
#include "varlen_case.hpp"

namespace flashgen::testing {
namespace {

constexpr MemoryKind kGpu = MemoryKind::cuda;

Options gpu_options(const VarlenCase& c, bool deterministic = true) {
  Options options;
  options.backend = Backend::cuda;
  options.causal = c.causal;
  options.deterministic = deterministic;
  return options;
}

class GpuVarlen : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(GpuVarlen, ForwardMatchesTheReferencePerSequence) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_varlen_forward(GetParam(), kGpu, gpu_options(GetParam()));
}

TEST_P(GpuVarlen, BackwardMatchesTheReferencePerSequence) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_varlen_backward(GetParam(), kGpu, gpu_options(GetParam()));
}

TEST_P(GpuVarlen, AtomicBackwardMatchesTheReferencePerSequence) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_varlen_backward(GetParam(), kGpu, gpu_options(GetParam(), false));
}

// cu_seqlens in host memory with CUDA tensors: read as they are (the
// sinks' gradient is refused there, below).
TEST_P(GpuVarlen, HostOffsetsServeCudaTensors) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  check_varlen_forward(GetParam(), kGpu, gpu_options(GetParam()), true);
  if (!GetParam().sinks) check_varlen_backward(GetParam(), kGpu, gpu_options(GetParam()), true);
}

// check_indices: device offsets read back and checked as host ones.
TEST_P(GpuVarlen, CheckedDeviceOffsets) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  Options options = gpu_options(GetParam());
  VarlenTensors t(GetParam(), kGpu);
  VarlenForwardArgs args = t.forward_args(GetParam());
  args.check_indices = true;
  EXPECT_NO_THROW(forward_varlen(args, t.with_score_options(GetParam(), options)));
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuVarlen, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

// Where the plain kernels run per sequence (cu_seqlens in host memory),
// dL/dsink would be summed on the host from device shares: refused, naming
// the option, before anything runs. (Device offsets: GpuVarlen's sinks case.)
TEST(GpuVarlenSinks, HostOffsetsRefuseTheSinksGradientOnCudaTensors) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  VarlenCase c{"sinks", {40, 7}, {40, 9}, 2, 1, 64, 64, true};
  c.sinks = true;
  VarlenTensors t(c, kGpu, true);
  const Options options = t.with_score_options(c, gpu_options(c));
  EXPECT_NO_THROW(forward_varlen(t.forward_args(c), options));
  EXPECT_TRUE(fails_with(ErrorCode::unsupported, "options.sinks",
                         [&] { backward_varlen(t.backward_args(c), options); }));
}

// TMA reads a sequence's last key block whole, into the next sequence's
// rows: an Inf in the next sequence's keys and a NaN in its values must not
// reach this sequence's outputs, which stay bit for bit those of the same
// call without them (forward; the backward copies only its own rows).
TEST(GpuVarlenNeighbours, AnInfOrNanInOneSequenceReachesNoOther) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  for (const std::int64_t dim : {64, 128, 40}) {
    const VarlenCase c{"neighbours_d" + std::to_string(dim), {100, 50}, {100, 70}, 4, 2, dim,
                       dim, false};
    VarlenTensors clean(c, kGpu), poisoned(c, kGpu);
    poisoned.k.fill_rows(100, 170, std::numeric_limits<float>::infinity());
    poisoned.v.fill_rows(100, 170, std::numeric_limits<float>::quiet_NaN());
    forward_varlen(clean.forward_args(c), gpu_options(c));
    forward_varlen(poisoned.forward_args(c), gpu_options(c));
    const std::vector<double> want = clean.o.values(clean.o.download());
    const std::vector<double> got = poisoned.o.values(poisoned.o.download());
    const std::size_t first_sequence = 100 * c.heads_q * c.dim_v;
    for (std::size_t i = 0; i < first_sequence; ++i)
      ASSERT_EQ(want[i], got[i]) << c.name << ": o element " << i << " of the first sequence";
  }
}

// Offsets the kernels read unchecked may be anything: decreasing, past the
// packed length, sequences longer than max_seqlen. The kernels clamp them to
// the packed tensors, so no byte outside the tensors changes and nothing
// faults (the sanitizer sweep runs this too).
TEST(GpuVarlenUnchecked, OffsetsOutOfRuleStayInsideTheTensors) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const VarlenCase c{"unchecked", {30, 50, 20}, {30, 50, 20}, 2, 1, 64, 64, true};
  VarlenTensors t(c, kGpu);
  const std::vector<std::int32_t> bad_q = {0, 90, 10, 1000}, bad_k = {-5, 60, 40, 100};
  t.cu_q_storage->upload(bad_q.data(), bad_q.size() * sizeof(std::int32_t));
  t.cu_k_storage->upload(bad_k.data(), bad_k.size() * sizeof(std::int32_t));
  VarlenBackwardArgs args = t.backward_args(c);
  args.max_seqlen_q = args.max_seqlen_k = 40;  // shorter than some
  const Options options = gpu_options(c);
  forward_varlen({args.q, args.k, args.v, args.o, args.lse, args.cu_seqlens_q,
                  args.cu_seqlens_k, args.max_seqlen_q, args.max_seqlen_k},
                 options);
  backward_varlen(args, options);
  for (const TestTensor* out : {&t.o, &t.lse, &t.grad_q, &t.grad_k, &t.grad_v})
    EXPECT_EQ(out->check_outside_unchanged(out->download()), "");
  for (const TestTensor* input : {&t.q, &t.k, &t.v, &t.grad_o})
    EXPECT_EQ(input->check_unchanged(input->download()), "");
  // Checked, the same offsets are refused by name.
  args.check_indices = true;
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "cu_seqlens_q",
                         [&] { backward_varlen(args, options); }));
}

}  // namespace
}  // namespace flashgen::testing
