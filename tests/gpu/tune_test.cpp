// Tuning never changes results: every candidate that survives pruning, for
// every tuned kernel kind at D = 64 and D = 127, gives outputs within the
// correctness rule on a small problem when forced by ScopedTuningOverride.
// And the tuner end to end on a small problem: no candidate is wrong, the
// winner is never slower than the default. SKIPPED where no GPU can run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention_case.hpp"
#include "attention_check.hpp"
#include "codegen/heuristics.hpp"
#include "cuda/kernel_args.hpp"
#include "cuda/runtime/runtime.hpp"
#include "device_storage.hpp"
#include "test_tensor.hpp"
#include "tune/search_space.hpp"
#include "tune/tuner.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen::testing {
namespace {

struct KindCase {
  KernelKind kind;
  int dim;
  bool causal;
};

std::string name_of(const KindCase& c) {
  return std::string(to_string(c.kind)) + "_d" + std::to_string(c.dim) +
         (c.causal ? "_causal" : "");
}

// Printed as its name, so test names never carry the struct's padding bytes.
void PrintTo(const KindCase& c, std::ostream* os) { *os << name_of(c); }

// Two blocks of the largest block size and a partial one on both sides, a
// GQA group; causal with seq_q > seq_kv leaves rows that see no key.
Case small_case(const KindCase& k) {
  Case c;
  c.batch = 1;
  c.seq_q = 300;
  c.seq_kv = 277;
  c.heads_q = 2;
  c.heads_kv = 1;
  c.dim_qk = c.dim_v = k.dim;
  c.causal = k.causal;
  c.dtype = DType::bf16;
  return c;
}

// The packed tensors of a case: the alignment class they give the spec.
int packed_vec(const Case& c) {
  void* const aligned = reinterpret_cast<void*>(std::uintptr_t{1} << 20);
  const TensorView q = TensorView::bshd(aligned, c.dtype, c.batch, c.seq_q, c.heads_q, c.dim_qk);
  return cuda::alignment_class({&q});
}

class TunedCandidates : public ::testing::TestWithParam<KindCase> {};

TEST_P(TunedCandidates, EverySurvivorMatchesTheReference) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const KindCase& k = GetParam();
  const Case c = small_case(k);
  const int ordinal = cuda::current_device();
  const cuda::DeviceInfo& device = cuda::device_info(ordinal);
  KernelSpec spec;
  spec.kind = k.kind;
  spec.dtype = c.dtype;
  spec.dim_qk = spec.dim_v = k.dim;
  spec.causal = k.causal;
  spec.vec = packed_vec(c);
  spec.arch = device.arch();

  PruneSettings settings;
  settings.shared_limit = device.shared_per_block_optin;
  settings.top = 1000;                           // every survivor
  settings.compile = compile_and_load(ordinal);  // loaded in parallel, before the checks
  const PruneResult pruned =
      prune(spec, default_tuning(spec, device.shared_per_block_optin), settings);
  ASSERT_GT(pruned.kept.size(), 1u);

  Options options;
  options.backend = Backend::cuda;
  options.deterministic = k.kind != KernelKind::backward_atomic;
  for (const Candidate& candidate : pruned.kept) {
    SCOPED_TRACE(spec.to_string() + " | " + candidate.tuning.to_string());
    const ScopedTuningOverride forced(k.kind, candidate.tuning);
    if (k.kind == KernelKind::forward)
      EXPECT_TRUE(check_forward(c, options));
    else
      EXPECT_TRUE(check_backward(c, options));
  }
}

INSTANTIATE_TEST_SUITE_P(Tune, TunedCandidates,
                         ::testing::Values(KindCase{KernelKind::forward, 64, false},
                                           KindCase{KernelKind::forward, 127, true},
                                           KindCase{KernelKind::backward_query, 64, true},
                                           KindCase{KernelKind::backward_query, 127, false},
                                           KindCase{KernelKind::backward_key_value, 64, false},
                                           KindCase{KernelKind::backward_key_value, 127, true},
                                           KindCase{KernelKind::backward_atomic, 64, true},
                                           KindCase{KernelKind::backward_atomic, 127, false}),
                         [](const ::testing::TestParamInfo<KindCase>& info) {
                           return name_of(info.param);
                         });

TEST(Tuner, SmallProblemEndToEnd) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const MemoryKind gpu = MemoryKind::cuda;
  const DType t = DType::bf16;
  const std::int64_t b = 1, s = 1024, h = 4, d = 96;
  TestTensor q(gpu, t, b, s, h, d, Layout::bshd), k(gpu, t, b, s, h, d, Layout::bshd),
      v(gpu, t, b, s, h, d, Layout::bshd), o(gpu, t, b, s, h, d, Layout::bshd),
      grad_o(gpu, t, b, s, h, d, Layout::bshd), grad_q(gpu, t, b, s, h, d, Layout::bshd),
      grad_k(gpu, t, b, s, h, d, Layout::bshd), grad_v(gpu, t, b, s, h, d, Layout::bshd);
  TestTensor lse = TestTensor::row_stats(gpu, b, h, s);
  q.fill_random(11);
  k.fill_random(12);
  v.fill_random(13);
  grad_o.fill_random(14);
  const ForwardArgs forward_args{q.view(), k.view(), v.view(), o.view(), lse.stats_view()};
  const BackwardArgs backward_args{q.view(),      k.view(),      v.view(),
                                   o.view(),      grad_o.view(), lse.stats_view(),
                                   grad_q.view(), grad_k.view(), grad_v.view()};
  Problem p;
  p.batch = b;
  p.heads_q = p.heads_kv = h;
  p.seq_q = p.seq_kv = s;
  p.dim_qk = p.dim_v = d;
  p.dtype = t;
  p.causal = true;
  p.scale = 1.0 / std::sqrt(double(d));

  TimingSettings timing;
  timing.warmup = 1;
  timing.repeats = 3;
  const Timer timer({forward_args}, {backward_args}, p.causal, timing);
  const ReferenceCheck reference(t, d, d, p.causal);
  GpuRunner runner(reference, timer);
  TunerSettings settings;
  settings.kinds = kinds_named({"forward", "backward", "backward_atomic"});
  settings.top = 2;
  set_device(settings, cuda::current_device());
  int started = 0, done = 0;
  TunerProgress progress;
  progress.kind_started = [&](KernelKind, int) { ++started; };
  progress.candidate_done = [&](KernelKind, const CandidateOutcome&) { ++done; };
  const int vec = cuda::alignment_class({&backward_args.q, &backward_args.grad_q});
  const std::vector<KindResult> results = tune_configuration(p, vec, runner, settings, progress);

  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(started, 4);
  int outcomes = 0;
  for (const KindResult& r : results) {
    SCOPED_TRACE(to_string(r.kind));
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_GT(r.default_ms, 0);
    EXPECT_GT(r.best_ms, 0);
    EXPECT_LE(r.best_ms, r.default_ms);
    if (!(r.best == r.default_tuning)) EXPECT_LT(r.best_ms, r.default_ms * (1 - kMinimumGain));
    for (const CandidateOutcome& out : r.outcomes)
      EXPECT_EQ(out.rejected.find("wrong results"), std::string::npos)
          << out.tuning.to_string() << ": " << out.rejected;
    outcomes += static_cast<int>(r.outcomes.size());
  }
  EXPECT_EQ(done, outcomes);
}

}  // namespace
}  // namespace flashgen::testing
