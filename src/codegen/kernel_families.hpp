// Which device template runs a (spec, tuning) pair: the header the generated
// source includes and the template it instantiates; the entry it exports is
// the kind's (entry_of).
#pragma once

#include <string>

#include "codegen/kernel_spec.hpp"

namespace flashgen {

struct KindInfo {
  const char* header;  // device header with the template, under src/cuda/device/
  const char* kernel;  // template name
};

// Throws Error(invalid_argument) for a kind fp32 does not run.
KindInfo f32_info_of(KernelKind kind);
KindInfo info_of(const KernelSpec& spec, const TuningParams& t);
// The extern "C" name of a kind's kernel: flashgen_<kind>.
std::string entry_of(KernelKind kind);

// Row-parallel helper kernels take no tuning (one warp per query row).
bool is_row_kernel(KernelKind kind);

}  // namespace flashgen
