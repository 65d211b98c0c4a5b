// Which generated kernel a launch gets: its spec from the problem, its
// tuning from the tables or the heuristics, its source generated once per
// process and its compiled function from the caches (cuda/runtime). The
// spec and the tuning need no device (flashgen precompile uses them).
#pragma once

#include <string>

#include "codegen/generate.hpp"
#include "codegen/kernel_spec.hpp"
#include "common/problem.hpp"
#include "cuda/runtime/runtime.hpp"

namespace flashgen::cuda {

// The spec of kernel `kind` for a problem whose tensors have alignment
// class `vec` (kernel_args.hpp), on `arch`; split_keys: the split-key
// forward of decode. No device needed (flashgen precompile).
KernelSpec spec_of(KernelKind kind, const Problem& p, int vec, const std::string& arch,
                   bool split_keys = false);

// Shared memory the runtime reserves per resident CTA, out of the SM's.
constexpr std::size_t kSharedReservedPerCta = 1024;
// How many CTAs of `cta_bytes` of shared memory an SM of `sm_bytes` holds.
constexpr std::size_t ctas_per_sm(std::size_t cta_bytes, std::size_t sm_bytes) {
  return sm_bytes / (cta_bytes + kSharedReservedPerCta);
}

// Its tuning on a device allowing `shared_limit` bytes of shared memory per
// CTA: a forced tuning, a tuning-table row or the heuristic (the split-key
// forward: a forced one or the heuristic, the tables timing whole forwards;
// packed sequences: without TMA).
TuningParams tuning_of(const KernelSpec& spec, const Problem& p, std::size_t shared_limit);

// Everything needed to launch one generated kernel.
struct KernelChoice {
  KernelSpec spec;
  TuningParams tuning;
  const GeneratedKernel* generated = nullptr;  // owned by generated_kernel()'s memo
};

// The kernel of `kind` (spec_of, tuning_of) on device `ordinal`, its source
// generated once per process. `tma_readable`: whether TMA can read the tensors the kernel traverses
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
