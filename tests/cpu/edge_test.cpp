// CPU backend behaviour the tolerance rule alone does not pin down: rows that
// see no key are exactly zero / -inf, and LSE is optional in the forward.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "test_tensor.hpp"

namespace flashgen::testing {
namespace {

constexpr MemoryKind kHost = MemoryKind::host;

Options cpu_causal() {
  Options options;
  options.backend = Backend::cpu;
  options.causal = true;
  return options;
}

TEST(CpuEdges, RowsThatSeeNoKeyAreExactlyEmpty) {
  // Causal, seq_q = 70 > seq_kv = 5, bottom-right: rows 0 ... 64 see no key
  // (the first query block entirely, the second partly).
  const std::int64_t sq = 70, skv = 5, heads = 2, dim = 24;
  const std::int64_t empty_rows = sq - skv;
  TestTensor q(kHost, DType::bf16, 1, sq, heads, dim, Layout::bshd);
  TestTensor k(kHost, DType::bf16, 1, skv, heads, dim, Layout::bshd);
  TestTensor v(kHost, DType::bf16, 1, skv, heads, dim, Layout::bshd);
  TestTensor grad_o(kHost, DType::bf16, 1, sq, heads, dim, Layout::bshd);
  TestTensor o(kHost, DType::bf16, 1, sq, heads, dim, Layout::bshd);
  TestTensor lse = TestTensor::row_stats(kHost, 1, heads, sq);
  TestTensor grad_q(kHost, DType::bf16, 1, sq, heads, dim, Layout::bshd);
  TestTensor grad_k(kHost, DType::bf16, 1, skv, heads, dim, Layout::bshd);
  TestTensor grad_v(kHost, DType::bf16, 1, skv, heads, dim, Layout::bshd);
  q.fill_random(1), k.fill_random(2), v.fill_random(3), grad_o.fill_random(4);
  o.poison(), lse.poison(), grad_q.poison(), grad_k.poison(), grad_v.poison();

  ForwardArgs fa;
  fa.q = q.view(), fa.k = k.view(), fa.v = v.view(), fa.o = o.view();
  fa.lse = lse.stats_view();
  forward(fa, cpu_causal());
  BackwardArgs ba;
  ba.q = q.view(), ba.k = k.view(), ba.v = v.view(), ba.o = o.view(), ba.grad_o = grad_o.view();
  ba.lse = lse.stats_view();
  ba.grad_q = grad_q.view(), ba.grad_k = grad_k.view(), ba.grad_v = grad_v.view();
  backward(ba, cpu_causal());

  const std::vector<double> o_values = o.values(o.download());
  const std::vector<double> lse_values = lse.values(lse.download());
  const std::vector<double> dq_values = grad_q.values(grad_q.download());
  for (std::int64_t s = 0; s < sq; ++s) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const double row_lse = lse_values[h * sq + s];
      if (s < empty_rows) {
        EXPECT_EQ(row_lse, -INFINITY) << "row " << s;
      } else {
        EXPECT_TRUE(std::isfinite(row_lse)) << "row " << s;
      }
      for (std::int64_t d = 0; d < dim; ++d) {
        const std::size_t at = static_cast<std::size_t>((s * heads + h) * dim + d);
        if (s < empty_rows) {
          EXPECT_EQ(o_values[at], 0.0) << "o row " << s;
          EXPECT_EQ(dq_values[at], 0.0) << "grad_q row " << s;
        } else {
          EXPECT_NE(o_values[at], 0.0) << "o row " << s;
        }
      }
    }
  }
}

TEST(CpuEdges, LseIsOptional) {
  const std::int64_t sq = 33, skv = 65, heads = 3, dim = 40;
  TestTensor q(kHost, DType::f16, 2, sq, heads, dim, Layout::bhsd);
  TestTensor k(kHost, DType::f16, 2, skv, heads, dim, Layout::bhsd);
  TestTensor v(kHost, DType::f16, 2, skv, heads, dim, Layout::bhsd);
  TestTensor with_lse(kHost, DType::f16, 2, sq, heads, dim, Layout::bhsd);
  TestTensor without_lse(kHost, DType::f16, 2, sq, heads, dim, Layout::bhsd);
  TestTensor lse = TestTensor::row_stats(kHost, 2, heads, sq);
  q.fill_random(1), k.fill_random(2), v.fill_random(3);
  with_lse.poison(), without_lse.poison(), lse.poison();
  ForwardArgs fa;
  fa.q = q.view(), fa.k = k.view(), fa.v = v.view(), fa.o = with_lse.view();
  fa.lse = lse.stats_view();
  forward(fa, cpu_causal());
  fa.o = without_lse.view();
  fa.lse = RowStatsView{};
  forward(fa, cpu_causal());
  EXPECT_EQ(with_lse.values(with_lse.download()), without_lse.values(without_lse.download()));
  EXPECT_EQ(without_lse.check_all_written(without_lse.download()), "");
}

}  // namespace
}  // namespace flashgen::testing
