// The public entry points: each asks the planner, then dispatches to the
// backend it decides on. Errors carry the planner's code and reason.
#include <cstddef>

#include "api/plan.hpp"

namespace flashgen {

namespace {

const api::PlannedCall& require_ok(const api::PlannedCall& planned) {
  if (!planned.plan.ok) throw Error(planned.plan.error, planned.plan.reason);
  return planned;
}

}  // namespace

Plan plan_forward(const ForwardArgs& args, const Options& options) {
  return api::plan_call(args, options).plan;
}

Plan plan_backward(const BackwardArgs& args, const Options& options) {
  return api::plan_call(args, options).plan;
}

bool supports_forward(const ForwardArgs& args, const Options& options) {
  return plan_forward(args, options).ok;
}

bool supports_backward(const BackwardArgs& args, const Options& options) {
  return plan_backward(args, options).ok;
}

std::size_t backward_workspace_bytes(const BackwardArgs& args, const Options& options) {
  return require_ok(api::plan_call(args, options)).plan.workspace_bytes;
}

void forward(const ForwardArgs& args, const Options& options) {
  const api::DispatchedCall call = api::dispatch_call(args, options);
  api::run_forward(call.backend, call.problem, args, options);
}

void backward(const BackwardArgs& args, const Options& options) {
  const api::DispatchedCall call = api::dispatch_call(args, options);
  api::run_backward(call.backend, call.problem, args, options);
}

}  // namespace flashgen
