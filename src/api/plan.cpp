// The planner. Order of decisions:
//   1. validate the arguments into a Problem (invalid_argument names the rule);
//   2. pick the backend from the tensors' memory (automatic) or check the
//      requested one can reach it;
//   3. for a plan, ask that backend what it would run (CPU: a description;
//      CUDA: the generated kernels' names) and how much device scratch the
//      backward needs. forward() and backward() take steps 1 and 2 only
//      (dispatch_call): naming kernels costs strings a repeated call need not build.
// Empty problems are planned like any other: the host path writes their
// outputs directly, the CUDA backend writes them on its stream.
#include "api/plan.hpp"

#include <cstdio>
#include <thread>

#include "api/empty_outputs.hpp"
#include "api/validate.hpp"
#include "cpu/cpu_backend.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/runtime/runtime.hpp"

namespace flashgen::api {
namespace {

enum class Direction { forward, backward };

// One call as the planner sees it; exactly one of the argument pointers is set.
struct Call {
  Direction direction;
  const ForwardArgs* forward = nullptr;
  const BackwardArgs* backward = nullptr;
  const TensorView& q() const { return forward ? forward->q : backward->q; }
};

int resolved_cpu_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware > 0 ? static_cast<int>(hardware) : 1;
}

std::string empty_description(const Problem& p, Direction direction) {
  if (p.batch == 0) return "empty problem (batch = 0): nothing to write";
  if (p.heads_q == 0)
    return direction == Direction::forward || p.heads_kv == 0
               ? "empty problem (heads_q = 0): nothing to write"
               : "empty problem (heads_q = 0): dK = dV = 0 written directly";
  if (direction == Direction::forward) {
    if (p.seq_q == 0) return "empty problem (seq_q = 0): nothing to write";
    return "empty problem (seq_kv = 0): O = 0, LSE = -inf written directly";
  }
  if (p.seq_q == 0 && p.seq_kv == 0) return "empty problem (seq_q = seq_kv = 0): nothing to write";
  if (p.seq_q == 0) return "empty problem (seq_q = 0): dK = dV = 0 written directly";
  return "empty problem (seq_kv = 0): dQ = 0 written directly";
}

void plan_cpu(const Call& call, const Problem& p, const Options& options, Plan& plan) {
  if (is_empty(p)) {
    plan.kernels = {empty_description(p, call.direction)};
    return;
  }
  const int threads = resolved_cpu_threads(options.cpu_threads);
  char text[384];
  if (call.direction == Direction::forward)
    std::snprintf(text, sizeof(text), "cpu.forward (tiled online softmax, %s, %d threads)",
                  describe(p).c_str(), threads);
  else
    std::snprintf(text, sizeof(text), "cpu.backward (tiled, deterministic, %s, %d threads)",
                  describe(p).c_str(), threads);
  plan.kernels = {text};
  plan.workspace_bytes = 0;
}

void plan_cuda(const Call& call, const Problem& p, const Options& options, Plan& plan) {
  if (call.direction == Direction::forward) {
    plan.kernels = cuda::forward_kernel_names(p, *call.forward);
    plan.workspace_bytes = 0;
    return;
  }
  plan.kernels = cuda::backward_kernel_names(p, *call.backward, options.deterministic);
  plan.workspace_bytes = cuda::backward_workspace_bytes(p, options.deterministic);
  const BackwardArgs& args = *call.backward;
  if (args.workspace != nullptr && args.workspace_bytes < plan.workspace_bytes)
    throw Error(ErrorCode::invalid_argument,
                "workspace_bytes (" + std::to_string(args.workspace_bytes) +
                    ") must be >= backward_workspace_bytes() (" +
                    std::to_string(plan.workspace_bytes) +
                    ") when workspace is given; pass null to let the library allocate it");
}

// THE decision: the validated problem and the backend that runs it. Throws
// flashgen::Error with the broken rule.
DispatchedCall dispatch(const Call& call, const Options& options) {
  DispatchedCall out;
  out.problem = call.direction == Direction::forward ? validate_forward(*call.forward, options)
                                                     : validate_backward(*call.backward, options);
  out.backend = backend_of(call.q());
  if (out.backend == Backend::cuda) check_cuda_reachable(out.problem, call.q());
  return out;
}

// The plan: the decision, and what the backend would run for it.
PlannedCall decide(const Call& call, const Options& options) {
  PlannedCall out;
  Plan& plan = out.plan;
  try {
    const DispatchedCall decided = dispatch(call, options);
    out.problem = decided.problem;
    plan.backend = decided.backend;
    if (plan.backend == Backend::cpu)
      plan_cpu(call, out.problem, options, plan);
    else
      plan_cuda(call, out.problem, options, plan);
    plan.ok = true;
    plan.error = ErrorCode::ok;
  } catch (const Error& error) {
    plan.ok = false;
    plan.error = error.code();
    plan.reason = error.what();
    plan.kernels.clear();
    plan.workspace_bytes = 0;
  }
  return out;
}

}  // namespace

// The CUDA backend takes the problem's options, can run at all here, and
// q.device names a device. Availability holds for the process (the driver and
// NVRTC load once), so it is found once: a repeated call does not pay for it.
void check_cuda_reachable(const Problem& p, const TensorView& q) {
  // Before availability, so the message does not depend on the machine.
  const std::string refused = cuda::unsupported_option(p);
  if (!refused.empty()) throw Error(ErrorCode::unsupported, refused);
  static const cuda::Availability available = cuda::availability();
  if (!available.ok)
    throw Error(ErrorCode::unsupported, "the CUDA backend cannot run here: " + available.reason);
  const int devices = cuda::device_count();
  if (q.device >= devices)
    throw Error(ErrorCode::invalid_argument,
                "q.device (" + std::to_string(q.device) + ") must be < the number of CUDA devices (" +
                    std::to_string(devices) + ")");
}

void run_forward(Backend backend, const Problem& p, const ForwardArgs& args,
                 const Options& options) {
  if (backend == Backend::cuda)
    cuda::forward(p, args, options.stream);
  else if (is_empty(p))
    write_empty_forward(p, args);
  else
    cpu::forward(p, args, options.cpu_threads);
}

void run_backward(Backend backend, const Problem& p, const BackwardArgs& args,
                  const Options& options) {
  if (backend == Backend::cuda)
    cuda::backward(p, args, options.stream, options.deterministic);
  else if (is_empty(p))
    write_empty_backward(p, args);
  else
    cpu::backward(p, args, options.cpu_threads);
}

PlannedCall plan_call(const ForwardArgs& args, const Options& options) {
  return decide({Direction::forward, &args, nullptr}, options);
}

PlannedCall plan_call(const BackwardArgs& args, const Options& options) {
  return decide({Direction::backward, nullptr, &args}, options);
}

DispatchedCall dispatch_call(const ForwardArgs& args, const Options& options) {
  return dispatch({Direction::forward, &args, nullptr}, options);
}

DispatchedCall dispatch_call(const BackwardArgs& args, const Options& options) {
  return dispatch({Direction::backward, nullptr, &args}, options);
}

namespace {

// " window=(128,0) softcap=30 alibi sinks mask=(...)" for the options that are set.
std::string describe_score_options(const Problem& p) {
  std::string text;
  char part[96];
  if (p.causal && p.causal_alignment == CausalAlignment::top_left) text += " top_left";
  if (p.has_window()) {
    std::snprintf(part, sizeof(part), " window=(%lld,%lld)", static_cast<long long>(p.window_left),
                  static_cast<long long>(p.window_right));
    text += part;
  }
  if (p.softcap > 0.0) {
    std::snprintf(part, sizeof(part), " softcap=%.4g", p.softcap);
    text += part;
  }
  if (p.alibi_slopes.given()) text += " alibi";
  if (p.has_sinks()) text += " sinks";
  if (p.has_mask()) text += " mask=" + p.mask->expression.canonical();
  return text;
}

}  // namespace

std::string describe(const Problem& p) {
  char text[256];
  std::snprintf(text, sizeof(text),
                "B=%lld Hq=%lld Hkv=%lld Sq=%lld Skv=%lld Dqk=%lld Dv=%lld %s%s scale=%.4g",
                static_cast<long long>(p.batch), static_cast<long long>(p.heads_q),
                static_cast<long long>(p.heads_kv), static_cast<long long>(p.seq_q),
                static_cast<long long>(p.seq_kv), static_cast<long long>(p.dim_qk),
                static_cast<long long>(p.dim_v), to_string(p.dtype), p.causal ? " causal" : "",
                p.scale);
  return text + describe_score_options(p);
}

}  // namespace flashgen::api
