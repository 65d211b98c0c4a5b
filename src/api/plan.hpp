// The planner: ONE function decides what runs for a problem, or why it
// cannot. plan_forward / plan_backward / supports_* / backward_workspace_bytes
// and forward / backward all go through it, so they cannot disagree.
// forward / backward stop at the decision (dispatch_call); the plans add the
// names of the kernels that would run.
#pragma once

#include <string>

#include "common/problem.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::api {

struct PlannedCall {
  Problem problem;  // meaningful only when plan.ok
  Plan plan;
};

// The validated problem and the backend that runs it.
struct DispatchedCall {
  Problem problem;
  Backend backend = Backend::cpu;
};

// Throws flashgen::Error (invalid_argument, unsupported) with the broken rule.
DispatchedCall dispatch_call(const ForwardArgs& args, const Options& options);
DispatchedCall dispatch_call(const BackwardArgs& args, const Options& options);

// The backend of tensors in this memory: CUDA for device memory, else the
// CPU (validation has checked that an explicit backend reaches the memory).
inline Backend backend_of(const TensorView& q) {
  return q.memory == MemoryKind::cuda ? Backend::cuda : Backend::cpu;
}

// Runs a validated problem on `backend`: the CUDA backend writes an empty
// problem's outputs on its stream, the CPU path writes them on the host.
void run_forward(Backend backend, const Problem& p, const ForwardArgs& args,
                 const Options& options);
void run_backward(Backend backend, const Problem& p, const BackwardArgs& args,
                  const Options& options);

// That the CUDA backend takes the problem's options, can run here, and
// q.device names a device; throws flashgen::Error otherwise.
void check_cuda_reachable(const Problem& p, const TensorView& q);

// Never throws flashgen::Error: a broken rule or a missing backend comes back
// as plan.ok == false with plan.error and plan.reason.
PlannedCall plan_call(const ForwardArgs& args, const Options& options);
PlannedCall plan_call(const BackwardArgs& args, const Options& options);

// Whether no (query, key) pair exists: no batch, no query head or a
// zero-length sequence leaves only zeros (and -inf log-sum-exps) to write,
// as torch's SDPA returns for such shapes.
inline bool is_empty(const Problem& p) {
  return p.batch == 0 || p.heads_q == 0 || p.seq_q == 0 || p.seq_kv == 0;
}

// "B=2 Hq=16 Hkv=16 Sq=4096 Skv=4096 Dqk=128 Dv=128 bf16 causal scale=0.0884"
std::string describe(const Problem& p);

}  // namespace flashgen::api
