// cuda::backward_stage, the bench's way to time one kernel of the
// deterministic backward: backward_query then backward_key_value, each
// launched alone, give the full backward's gradients to the bit.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "api/plan.hpp"
#include "cuda/cuda_backend.hpp"
#include "device_storage.hpp"
#include "test_tensor.hpp"

namespace flashgen::testing {
namespace {

TEST(GpuBackwardStage, StagesInTurnEqualTheFullBackward) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const MemoryKind gpu = MemoryKind::cuda;
  // GQA and causal: backward_key_value sums over query heads and skips blocks.
  const std::int64_t b = 2, s = 300, hq = 4, hkv = 2, d = 96;
  TestTensor q(gpu, DType::bf16, b, s, hq, d, Layout::bshd);
  TestTensor k(gpu, DType::bf16, b, s, hkv, d, Layout::bshd);
  TestTensor v(gpu, DType::bf16, b, s, hkv, d, Layout::bshd);
  TestTensor o(gpu, DType::bf16, b, s, hq, d, Layout::bshd);
  TestTensor grad_o(gpu, DType::bf16, b, s, hq, d, Layout::bshd);
  TestTensor lse = TestTensor::row_stats(gpu, b, hq, s);
  TestTensor grad_q(gpu, DType::bf16, b, s, hq, d, Layout::bshd);
  TestTensor grad_k(gpu, DType::bf16, b, s, hkv, d, Layout::bshd);
  TestTensor grad_v(gpu, DType::bf16, b, s, hkv, d, Layout::bshd);
  q.fill_random(1);
  k.fill_random(2);
  v.fill_random(3);
  grad_o.fill_random(4);
  Options options;
  options.backend = Backend::cuda;
  options.deterministic = true;
  options.causal = true;
  forward({q.view(), k.view(), v.view(), o.view(), lse.stats_view()}, options);

  BackwardArgs args{q.view(),      k.view(),         v.view(),      o.view(),
                    grad_o.view(), lse.stats_view(), grad_q.view(), grad_k.view(),
                    grad_v.view()};
  const api::PlannedCall planned = api::plan_call(args, options);
  ASSERT_TRUE(planned.plan.ok) << planned.plan.reason;
  std::unique_ptr<Storage> workspace = make_storage(gpu, planned.plan.workspace_bytes);
  args.workspace = workspace->data();
  args.workspace_bytes = workspace->bytes();
  // Device images start from the host image (guard bands included), as in
  // every later call.
  grad_q.poison();
  grad_k.poison();
  grad_v.poison();
  backward(args, options);
  const std::vector<std::vector<unsigned char>> full = {grad_q.download(), grad_k.download(),
                                                        grad_v.download()};
  const char* names[] = {"dQ", "dK", "dV"};
  // The full backward repeats itself to the bit (else the comparison below
  // would blame the stages for the kernels' own nondeterminism).
  grad_q.poison();
  grad_k.poison();
  grad_v.poison();
  backward(args, options);
  const std::vector<std::vector<unsigned char>> again = {grad_q.download(), grad_k.download(),
                                                         grad_v.download()};
  const TestTensor* grads[] = {&grad_q, &grad_k, &grad_v};
  for (int i = 0; i < 3; ++i) {
    std::size_t first = 0, count = 0;
    for (std::size_t byte = 0; byte < full[i].size(); ++byte)
      if (again[i][byte] != full[i][byte] && count++ == 0) first = byte;
    ASSERT_EQ(count, 0u) << names[i] << " of the full backward differs run to run in " << count
                         << " bytes, first at " << grads[i]->describe_byte(first);
  }

  // NaN everywhere the stages write or read, so a Dterm not handed over shows.
  grad_q.poison();
  grad_k.poison();
  grad_v.poison();
  const std::vector<unsigned char> nan_bytes(workspace->bytes(), 0xff);
  workspace->upload(nan_bytes.data(), nan_bytes.size());
  for (KernelKind stage : {KernelKind::backward_query, KernelKind::backward_key_value})
    cuda::backward_stage(planned.problem, args, options.stream, stage);
  const std::vector<std::vector<unsigned char>> staged = {grad_q.download(), grad_k.download(),
                                                          grad_v.download()};
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(staged[i] == full[i]) << names[i] << " differs from the full backward";
}

}  // namespace
}  // namespace flashgen::testing
