// What the commands that generate kernels (`flashgen source`, `precompile`)
// share: kernel kinds by name, the alignment class of packed tensors, the
// user-mask options, and the listing of one generated kernel, optionally with
// the embedded device headers it includes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "codegen/kernel_spec.hpp"
#include "common/mask_expression.hpp"

namespace flashgen::cli {

// to_string() of every KernelKind, in declaration order (the --kind choices).
std::vector<std::string> kernel_kind_names();
// The kind whose to_string() is `name`; throws Error(invalid_argument) otherwise.
KernelKind kernel_kind_named(const std::string& name);

// The alignment class of packed tensors (Q, K of dim_qk; V, O of dim_v) in
// allocations aligned to 256 bytes (cudaMalloc, PyTorch's allocator): every
// stride is a multiple of its dim, so the class is the largest of 8, 4, 2, 1
// dividing both dims.
int packed_vec(std::int64_t dim_qk, std::int64_t dim_v);

// --mask-mod EXPR and --mask-arrays LIST (the arrays it reads).
void declare_mask_options(Arguments& a);
// The expression they give, parsed (nullopt without --mask-mod); a
// UsageError naming the options for a bad expression, or --mask-arrays alone.
std::optional<mask::Expression> mask_option(const Arguments& a);

// The embedded device headers (src/cuda/device/*.cuh) that `source` includes,
// directly or through each other, in the order their text enters the
// translation unit: a header comes after the headers it includes.
std::vector<std::string> included_headers(const std::string& source);

// One comment line with the spec, the tuning and the shared memory a CTA needs
// (against the limit of spec.arch), then generate(spec, tuning).source; with
// `headers`, each included header after a "// ---- file: NAME ----" line.
// Throws generate()'s Error when the tuning does not fit the spec.
std::string kernel_listing(const KernelSpec& spec, const TuningParams& tuning, bool headers);

}  // namespace flashgen::cli
