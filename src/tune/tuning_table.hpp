// Tuning tables: rows of measured winners per (kind, dtype, dims, causal,
// sequence bucket), shipped in data/tuning/<arch>.json and overridden by a
// user table in the cache directory.
#pragma once

#include <optional>

#include "codegen/kernel_spec.hpp"
#include "common/problem.hpp"

namespace flashgen {

// The tuning of the nearest row for this spec and problem, if a table has one.
std::optional<TuningParams> lookup_tuning(const KernelSpec& spec, const Problem& p);

}  // namespace flashgen
