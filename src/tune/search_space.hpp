// The tuner's candidates for one kernel spec and their pruning without a GPU:
//   1. the search space: rows {32, 64, 128} x warps {2, 4, 8} with one or two
//      16-row tiles per warp, cols {16, 32, 48, 64, 96, 128} (lopsided shapes such as
//      rows=64 cols=128 included), head {0, 64, 128, 256} where it splits the
//      kind's output dim, Q cached or not for the forward when Dqk <= 128;
//      on sm_90a the wgmma kernels' shapes, each also with a producer
//      warpgroup copying by TMA where the rows are 16-byte aligned;
//   2. drop what generate() refuses and what needs more shared memory than
//      the device allows;
//   3. rank the rest by the cost model (tune/cost_model.hpp), compile them in
//      that order on several threads and drop those that spill or use a stack
//      frame; stop once `top` have survived (compiling the rest could not
//      change the top of a ranking that is known before compiling).
// The default tuning is always kept, whatever its rank or resources: it is
// what runs without a table row, so every measurement is relative to it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "codegen/generate.hpp"
#include "codegen/kernel_spec.hpp"
#include "cuda/runtime/runtime.hpp"
#include "tune/cost_model.hpp"

namespace flashgen {

// The search space of `spec.kind` for the spec's dims, before any pruning.
std::vector<TuningParams> search_space(const KernelSpec& spec);

// The tunings that differ from `t` only in how the traversed tiles reach
// shared memory: `t` without a producer warpgroup, with a producer copying by
// TMA (16-byte aligned rows) into swizzled tiles or as 8-column slices, and
// for the forward with that producer two and four stages deep; on rows TMA
// cannot read, with a producer copying by cp.async (the forward's also four
// stages deep). Those
// generate() refuses and those over `shared_limit` are left out; `t` itself (as given) always comes first.
std::vector<TuningParams> pipeline_variants(const KernelSpec& spec, const TuningParams& t,
                                            std::size_t shared_limit);

// Compiles one generated kernel and returns what ptxas reported; throws
// flashgen::Error on a compile error. Called from several threads at once.
using CompileFunction =
    std::function<cuda::KernelResources(const KernelSpec& spec, const GeneratedKernel& kernel)>;
// cuda::compile_only: no GPU needed.
CompileFunction compile_without_device();
// cuda::precompile: no GPU needed, and the kernels land in the disk cache, so
// that a tuning run on a GPU with that cache compiles none of them again.
CompileFunction compile_into_cache();
// cuda::get_kernel on `ordinal`: the kernel is also loaded, so that timing it
// later compiles nothing.
CompileFunction compile_and_load(int ordinal);

struct PruneSettings {
  std::size_t shared_limit = 232448;  // the device's opt-in bytes per block
  // Candidates to keep besides the default; 0: the default and `keep` only
  // (nothing else is ranked or compiled).
  int top = 12;
  // Kept and timed whatever their rank, as the default is (e.g. what the
  // table being extended already chose for the spec).
  std::vector<TuningParams> keep;
  int threads = 0;                    // compile threads; 0: hardware threads
  CostProblem problem;                // for the cost ranking
  CostDevice device;
  CompileFunction compile;  // empty: compile_without_device()
};

struct Candidate {
  TuningParams tuning;
  bool is_default = false;
  bool kept_anyway = false;  // from PruneSettings::keep
  double estimated_cycles = 0;
  std::size_t shared_bytes = 0;
  cuda::KernelResources resources;  // from the compile (the default: when it compiled)
};

struct Rejected {
  TuningParams tuning;
  std::string reason;  // "shared memory 245760 > 232448", "spills 16 bytes", ...
};

struct PruneResult {
  std::vector<Candidate> kept;  // best estimate first; the default among them
  std::vector<Rejected> rejected;
  int space = 0;     // size of the search space
  int compiled = 0;  // kernels compiled (the rest were not needed)
};

PruneResult prune(const KernelSpec& spec, const TuningParams& default_tuning,
                  const PruneSettings& settings);

}  // namespace flashgen
