// Reads register, spill, stack and shared-memory figures from the verbose
// ptxas report NVRTC returns with --ptxas-options=-v. The report holds one
// block per entry function (ptxas 12.x/13.x):
//
//   ptxas info    : Compiling entry function 'write_ids' for 'sm_90a'
//   ptxas info    : Function properties for write_ids
//   ptxas         .     400 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 32 registers, used 1 barriers, 400 bytes cumulative stack size, 256 bytes smem
//
// Non-inlined device functions get their own "Function properties for f"
// line inside the entry's block; their stack lines are not the entry's.
#pragma once

#include <string>
#include <vector>

#include "cuda/runtime/runtime.hpp"

namespace flashgen::cuda {

// Fills `out` with the figures for `entry`; false when the log has no block
// for it (then `out` is left zeroed).
bool parse_ptxas_log(const std::string& log, const std::string& entry, KernelResources* out);

// Every entry function the report names, in order.
std::vector<std::string> ptxas_entry_names(const std::string& log);

}  // namespace flashgen::cuda
