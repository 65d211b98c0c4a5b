// The CUDA backend as the planner and the public API see it. Everything
// behind it (driver, NVRTC, caches, generated kernels) is loaded lazily, so a
// machine with no GPU or toolkit still runs the CPU backend.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "common/problem.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {

// Whether a CUDA device can run kernels here, and if not, why.
struct Availability {
  bool ok = false;
  std::string reason;
};
Availability availability();

// The first option of the problem the CUDA kernels do not run yet, as the
// message of the error the planner raises ("" when there is none). The one
// place that says what the GPU path refuses; the planner never moves such a
// call to another backend.
std::string unsupported_option(const Problem& p);

// Names of the kernels that would run (spec + tuning strings), for plans.
std::vector<std::string> forward_kernel_names(const Problem& p, const ForwardArgs& args);
std::vector<std::string> backward_kernel_names(const Problem& p, const BackwardArgs& args,
                                               bool deterministic);
std::size_t backward_workspace_bytes(const Problem& p, bool deterministic);

// The backward as a list of launches. Two-kernel: backward_query (dQ and
// Dterm) then backward_key_value (dK, dV). Atomic: backward_prepare (Dterm,
// zeroed fp32 dQ), backward_atomic (dK, dV, dQ partials), convert_grad_q.
// With sinks, backward_sinks (their gradient, from Dterm) last. Packed
// sequences (Problem::sequences) take the two-kernel backward.
std::vector<KernelKind> backward_kinds(const Problem& p, bool atomic);

// The tuning a spec gets for a problem: a tuning-table row, else the
// heuristic for a device allowing `shared_limit` bytes of shared memory;
// as a call runs it (scheduled_as_run: the forward's walk where it is
// expected to win, its warpgroups' turns), unless the tuning is forced.
TuningParams tuning_for(const KernelSpec& spec, const Problem& p, std::size_t shared_limit);

// `bytes` of device memory at `device` into host memory at `host`, in the
// order of `stream` (waits for the stream): index arrays the host must read.
void copy_device_to_host(void* host, const void* device, std::size_t bytes, void* stream);

void forward(const Problem& p, const ForwardArgs& args, void* stream);
void backward(const Problem& p, const BackwardArgs& args, void* stream, bool deterministic);

// One kernel of the deterministic backward alone (KernelKind::backward_query
// or backward_key_value), launched as `backward` launches it: same kernel,
// arguments and workspace layout. For `flashgen bench`, which times the two
// separately; not part of the public API. backward_key_value reads the Dterm
// that backward_query wrote into args.workspace (required here), so run the
// full backward with that workspace first.
void backward_stage(const Problem& p, const BackwardArgs& args, void* stream, KernelKind stage);

}  // namespace flashgen::cuda
