// Measuring tuning candidates on the GPU through the public API, with the
// candidate forced by a ScopedTuningOverride (tune/tuning_table.hpp):
//   - forward: flashgen::forward();
//   - backward_query, backward_key_value: flashgen::backward() with
//     deterministic = true (both kernels run; the total is timed);
//   - backward_atomic: flashgen::backward() with deterministic = false.
//
// Tuning never changes results: ReferenceCheck runs a candidate on a small
// problem and judges every output against the fp64 reference (computed once
// per problem) by the correctness rule of DESIGN.md,
//     max |X - ref| <= 2 · max |X_naive - ref| + atol   (NaN never passes),
// with the test suite's atol (tests/support/attention_check.hpp): half an ulp
// at max(1, max |ref|) for f16/bf16 outputs, 4e-6 relative for the fp32 LSE.
//
// Timer times calls with CUDA events (cuda::time_ms) over input sets the
// caller rotates (several, so the L2 cache cannot serve one call from the
// last), after warm-up, and reports the median.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "common/problem.hpp"
#include "cuda/runtime/runtime.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen {

// The call that runs a kernel kind: forward, or the (non-)deterministic backward.
bool is_backward_kind(KernelKind kind);
bool deterministic_for(KernelKind kind);  // false only for backward_atomic

// A small problem on the current CUDA device with its fp64 reference.
class ReferenceCheck {
 public:
  // Shape: batch 1, 2 query heads sharing 1 key/value head, seq_q = 300,
  // seq_kv = 277: more than two blocks of the largest block size with a
  // partial last one on both sides, a GQA group, and with causal a negative
  // offset so some rows see no key. Inputs random in ±[1/64, 1] (never zero).
  // threads: for the reference (<= 0: all).
  ReferenceCheck(DType dtype, int dim_qk, int dim_v, bool causal, int threads = 0);
  ~ReferenceCheck();
  ReferenceCheck(const ReferenceCheck&) = delete;
  ReferenceCheck& operator=(const ReferenceCheck&) = delete;

  // Runs the call of `kind` (the forward first for a backward kind) with the
  // overrides in force and judges every output it produced. "" when all pass,
  // else the first failure: "dK max|out-ref| 3.1e-02 > bound 1.2e-02".
  // Launch errors (flashgen::Error) are reported the same way.
  std::string check(KernelKind kind) const;

  const Problem& problem() const { return problem_; }

 private:
  struct Buffers;
  Problem problem_;
  std::unique_ptr<Buffers> buffers_;
};

struct TimingSettings {
  int warmup = 2;         // untimed calls before the timed ones
  int repeats = 7;        // timed calls; the median is reported
  int quick_repeats = 3;  // timed calls of the first look
  // A candidate whose first look is this much slower than the best so far is
  // not timed further (it cannot win; its quick median is reported).
  double cutoff = 1.25;
};

struct Measurement {
  double ms = 0;     // median
  bool cut = false;  // only the first look was timed
};

// Inputs of the timed problem: sets of arguments rotated between calls,
// made by the caller (device tensors of one shape, forward outputs written
// before a backward is timed).
class Timer {
 public:
  Timer(std::vector<ForwardArgs> forward, std::vector<BackwardArgs> backward, bool causal,
        TimingSettings settings);

  // Times the call of `kind` with the overrides in force. best_ms > 0 enables
  // the cut-off. Throws flashgen::Error when a call fails.
  Measurement time(KernelKind kind, double best_ms) const;
  // Full repeats, no cut-off.
  double time_full(KernelKind kind) const;

  // Runs the forward on every set (writes O and LSE for the backward).
  void prepare_backward() const;

 private:
  std::vector<double> time_calls(KernelKind kind, int warmup, int repeats) const;

  std::vector<ForwardArgs> forward_;
  std::vector<BackwardArgs> backward_;
  Options options_;
  TimingSettings settings_;
  std::shared_ptr<cuda::DeviceBuffer> workspace_;
};

double median_of(std::vector<double> values);

// What the tuner needs to run candidates (tune/tuner.hpp). Every call runs
// with the tuning overrides in force (ScopedTuningOverride).
class CandidateRunner {
 public:
  virtual ~CandidateRunner() = default;
  // Writes the forward outputs that timed backward calls read.
  virtual void prepare_backward() = 0;
  // "" when the call of `kind` gives correct results, else why not.
  virtual std::string check(KernelKind kind) = 0;
  // As Timer::time and Timer::time_full.
  virtual Measurement time(KernelKind kind, double best_ms) = 0;
  virtual double time_full(KernelKind kind) = 0;
};

// The GPU: checks on a ReferenceCheck, times on a Timer (both outlive it).
class GpuRunner : public CandidateRunner {
 public:
  GpuRunner(const ReferenceCheck& reference, const Timer& timer)
      : reference_(reference), timer_(timer) {}
  void prepare_backward() override { timer_.prepare_backward(); }
  std::string check(KernelKind kind) override { return reference_.check(kind); }
  Measurement time(KernelKind kind, double best_ms) override { return timer_.time(kind, best_ms); }
  double time_full(KernelKind kind) override { return timer_.time_full(kind); }

 private:
  const ReferenceCheck& reference_;
  const Timer& timer_;
};

}  // namespace flashgen
