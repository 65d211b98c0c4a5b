// The CPU backend gives bit-identical outputs for any thread count: every
// output element is owned by one task that sums in a fixed order.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "active_kernels.hpp"
#include "attention_case.hpp"
#include "score_options.hpp"
#include "test_tensor.hpp"

namespace flashgen::testing {
namespace {

struct Outputs {
  std::vector<unsigned char> o, lse, grad_q, grad_k, grad_v;
  std::vector<float> grad_sinks;
};

// Forward then backward through the public API with `threads` CPU threads
// and the masks and score modifiers of `given` (none by default).
Outputs run_with_threads(const Case& c, int threads, const Options& given = {}) {
  const MemoryKind host = MemoryKind::host;
  TestTensor q(host, c.dtype, c.batch, c.seq_q, c.heads_q, c.dim_qk, c.layout);
  TestTensor k(host, c.dtype, c.batch, c.seq_kv, c.heads_kv, c.dim_qk, c.layout);
  TestTensor v(host, c.dtype, c.batch, c.seq_kv, c.heads_kv, c.dim_v, c.layout);
  TestTensor grad_o(host, c.dtype, c.batch, c.seq_q, c.heads_q, c.dim_v, c.layout);
  TestTensor o(host, c.dtype, c.batch, c.seq_q, c.heads_q, c.dim_v, c.layout);
  TestTensor lse = TestTensor::row_stats(host, c.batch, c.heads_q, c.seq_q);
  TestTensor grad_q(host, c.dtype, c.batch, c.seq_q, c.heads_q, c.dim_qk, c.layout);
  TestTensor grad_k(host, c.dtype, c.batch, c.seq_kv, c.heads_kv, c.dim_qk, c.layout);
  TestTensor grad_v(host, c.dtype, c.batch, c.seq_kv, c.heads_kv, c.dim_v, c.layout);
  q.fill_random(1), k.fill_random(2), v.fill_random(3), grad_o.fill_random(4);
  for (TestTensor* out : {&o, &lse, &grad_q, &grad_k, &grad_v}) out->poison();

  Options options = given;
  options.backend = Backend::cpu;
  options.causal = c.causal;
  options.cpu_threads = threads;
  std::vector<float> grad_sinks(options.sinks.given() ? c.heads_q : 0);
  if (options.sinks.given()) options.grad_sinks = HeadVectorView::heads(grad_sinks.data(), c.heads_q);
  ForwardArgs fa;
  fa.q = q.view(), fa.k = k.view(), fa.v = v.view(), fa.o = o.view();
  fa.lse = lse.stats_view();
  forward(fa, options);
  BackwardArgs ba;
  ba.q = q.view(), ba.k = k.view(), ba.v = v.view(), ba.o = o.view(), ba.grad_o = grad_o.view();
  ba.lse = lse.stats_view();
  ba.grad_q = grad_q.view(), ba.grad_k = grad_k.view(), ba.grad_v = grad_v.view();
  backward(ba, options);
  return {o.download(),      lse.download(),    grad_q.download(),
          grad_k.download(), grad_v.download(), grad_sinks};
}

void expect_identical(const Outputs& a, const Outputs& b, int threads) {
  EXPECT_EQ(a.o, b.o) << "o differs with " << threads << " threads";
  EXPECT_EQ(a.lse, b.lse) << "lse differs with " << threads << " threads";
  EXPECT_EQ(a.grad_q, b.grad_q) << "grad_q differs with " << threads << " threads";
  EXPECT_EQ(a.grad_k, b.grad_k) << "grad_k differs with " << threads << " threads";
  EXPECT_EQ(a.grad_v, b.grad_v) << "grad_v differs with " << threads << " threads";
  EXPECT_EQ(a.grad_sinks, b.grad_sinks) << "grad_sinks differs with " << threads << " threads";
}

TEST(CpuDeterminism, SameBitsForOneTwoAndThreeThreads) {
  // Several query and key blocks per head, GQA (two query heads write into
  // each dK, dV), a causal mask with seq_q < seq_kv and odd dimensions.
  const Case c{2, 600, 700, 4, 2, 72, 40, true, DType::bf16, Layout::bshd};
  const Outputs one = run_with_threads(c, 1);
  expect_identical(one, run_with_threads(c, 2), 2);
  expect_identical(one, run_with_threads(c, 3), 3);
}

// Every instruction set this machine runs, not only the dispatcher's choice
// (the bf16 GEMMs on AMX tiles and dot products included).
TEST(CpuDeterminism, SameBitsForOneAndThreeThreadsOnEveryInstructionSet) {
  const Case c{1, 530, 300, 4, 2, 64, 64, true, DType::bf16, Layout::bhsd};
  for (const cpu::TileKernels* kernels : cpu::runnable_tile_kernels()) {
    SCOPED_TRACE(kernels->name);
    ActiveKernels scope(*kernels);
    expect_identical(run_with_threads(c, 1), run_with_threads(c, 3), 3);
  }
}

// With every mask and modifier (window, top-left causal, soft cap, ALiBi,
// sinks and their gradient).
TEST(CpuDeterminism, SameBitsForOneAndThreeThreadsWithScoreModifiers) {
  const Case c{2, 600, 530, 4, 2, 72, 40, true, DType::bf16, Layout::bshd};
  ScoreOptions mods({300, 20, 2.0, 2, true, CausalAlignment::top_left}, c);
  const Outputs one = run_with_threads(c, 1, mods.options());
  expect_identical(one, run_with_threads(c, 3, mods.options()), 3);
}

// With a user mask (documents of 100 positions, and a prefix) on top of causal.
TEST(CpuDeterminism, SameBitsForOneAndThreeThreadsWithAMaskExpression) {
  const Case c{2, 600, 600, 4, 2, 72, 40, true, DType::bf16, Layout::bshd};
  std::vector<std::int32_t> doc(600), prefix = {50, 300};
  for (std::size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<std::int32_t>(i / 100);
  Options options;
  options.mask_mod = "doc[kv_idx] == doc[q_idx] || kv_idx < prefix[b]";
  options.mask_tensors = {MaskTensorView::int32("doc", doc.data(), 600),
                          MaskTensorView::int32("prefix", prefix.data(), 2)};
  const Outputs one = run_with_threads(c, 1, options);
  expect_identical(one, run_with_threads(c, 3, options), 3);
}

TEST(CpuDeterminism, SameBitsRunToRun) {
  const Case c{1, 130, 130, 7, 1, 40, 40, false, DType::f32, Layout::bhsd};
  const Outputs first = run_with_threads(c, 0);
  expect_identical(first, run_with_threads(c, 0), 0);
}

}  // namespace
}  // namespace flashgen::testing
