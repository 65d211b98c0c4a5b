// A rough time estimate of one kernel for a tuning, used only to rank the
// candidates that survive pruning so that the GPU times the most promising
// ones first. It never decides a tuning: the measurement does. It counts, per
// CTA iteration, tensor-core FLOPs, shared-memory bytes (what a warp reads
// from shared memory for its MMAs, plus the tile stores), exponentials,
// atomics and a barrier, takes the slowest of the pipes, and spreads the CTAs
// over the SMs in waves at the occupancy that shared memory, threads and an
// estimate of the registers allow.
#pragma once

#include <cstdint>

#include "codegen/kernel_spec.hpp"

namespace flashgen {

// The problem the estimate is for (the timed shape of the tuner).
struct CostProblem {
  std::int64_t batch = 2, heads_q = 16, heads_kv = 16, seq_q = 8192, seq_kv = 8192;
};

// What the estimate needs of the device; the defaults are an H200 (sm_90).
struct CostDevice {
  int sm_count = 132;
  std::int64_t shared_per_sm = 233472;  // bytes (228 KiB)
  int registers_per_sm = 65536;
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
};

// Registers per thread the kernel likely needs: fp32 accumulators and score
// tiles of the warp's row tiles, cached fragments, and a fixed part for
// addresses and softmax state; at most 255.
int estimated_registers(const KernelSpec& spec, const TuningParams& tuning);

// Estimated time in SM cycles (relative: compare estimates of one spec only).
double estimated_cycles(const KernelSpec& spec, const TuningParams& tuning, const CostProblem& p,
                        const CostDevice& device);

}  // namespace flashgen
