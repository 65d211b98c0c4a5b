// Which generated kernel a launch gets: its spec from the problem, its
// tuning from the tables or the heuristics, its source generated once per
// process and its compiled function from the caches (cuda/runtime).
#pragma once

#include "codegen/generate.hpp"
#include "codegen/kernel_spec.hpp"
#include "common/problem.hpp"
#include "cuda/runtime/runtime.hpp"

namespace flashgen::cuda {

// Everything needed to launch one generated kernel.
struct KernelChoice {
  KernelSpec spec;
  TuningParams tuning;
  const GeneratedKernel* generated = nullptr;  // owned by generated_kernel()'s memo
};

// The kernel of `kind` for a problem whose tensors have alignment class
// `vec` (kernel_args.hpp), on device `ordinal`; split_keys: the split-key
// forward of decode. `tma_readable`: whether TMA can read the tensors the kernel traverses
// (tma_can_read); where it cannot, a tuning whose producer copies by TMA
// runs the same shape without the producer (tuning_without_tma).
KernelChoice choose(KernelKind kind, const Problem& p, int vec, bool tma_readable, int ordinal,
                    bool split_keys = false);

// A kernel ready to launch: the choice and its loaded function.
struct ResolvedKernel {
  KernelChoice choice;
  const CompiledKernel* kernel = nullptr;  // owned by get_kernel's cache
};

// The kernel for a launch. A repeated call finds it by its signature (a few
// integers hashed): no tuning-table lookup, no key strings, no copy or hash
// of the source. Tuning overrides (the tuner, FLASHGEN_TUNING) bypass the
// memo, since they change between calls with the same signature.
ResolvedKernel resolve(KernelKind kind, const Problem& p, int vec, bool tma_readable,
                       int ordinal, bool split_keys = false);

}  // namespace flashgen::cuda
