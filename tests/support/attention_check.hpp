// The one place tests run attention through the public API and judge it.
//
// check_forward / check_backward build the case's tensors (random inputs,
// poisoned outputs, guard bands, the case's layout), call flashgen::forward /
// flashgen::backward with the given options (options.backend picks the
// backend; tensors live in CUDA memory for Backend::cuda, else on the host),
// and then require:
//   - every output element written (no poison left), nothing written outside
//     the outputs' elements (guards, row gaps), inputs unchanged byte for byte;
//   - no NaN, and for each output X in (O, LSE) or (dQ, dK, dV):
//       max |X - ref| <= 2 · max |X_naive - ref| + atol
//     where ref is the fp64 reference and X_naive the naive computation in the
//     case's dtype (cpu/reference.hpp), as FlashAttention's tests do.
//
// atol = absolute_slack(dtype) · max(1, max |ref|), for what the 2 · naive
// term cannot see:
//   f16, bf16: half an ulp of the output at its largest magnitude, i.e. the
//     output's own final rounding. Both computations round every output once;
//     the naive one may, by luck, land close at the few largest elements (its
//     max error then sits below half an ulp there), while a correct tiled
//     computation that lands on the other side of a rounding boundary would
//     fail without this term. Observed: dK of D = 3, Dv = 151 bf16 with
//     values near 25 (ulp 0.125) off by 0.091 against 2 · 0.044. A real
//     defect (mask, scale, Dterm, a lost head) costs far more than that.
//   f32: 4e-6, a few tens of fp32 ulps: the naive computation can be exact by
//     accident (one visible key gives P = 1, so O = V and dS = 0 exactly)
//     while a tiled one still carries fp32 reordering noise (dP - Dterm
//     cancels to ~1e-7 there, not to 0).
// LSE is fp32 for every dtype and uses the f32 slack.
//
// Setting FLASHGEN_TEST_REPORT=1 prints each output's errors even on success.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attention_case.hpp"
#include "flashgen/flashgen.hpp"
#include "test_tensor.hpp"

namespace flashgen::testing {

// Where a backend's tensors live: CUDA memory for Backend::cuda, else host.
MemoryKind memory_for(Backend backend);

// options.causal is taken from the case; the rest is passed through.
::testing::AssertionResult check_forward(const Case& c, const Options& options = {});
// Runs the forward first (through the same options) for O and LSE.
::testing::AssertionResult check_backward(const Case& c, const Options& options = {});

// The rule for one output; "" when it holds, else what broke it (NaN, the
// worst element with its index from `tensor`, the bound). `precision` is the
// dtype the output is stored in (f32 for LSE).
std::string tolerance_violation(const char* name, const TestTensor& tensor,
                                const std::vector<double>& out, const std::vector<double>& ref,
                                const std::vector<double>& naive, DType precision);

// The slack described above, per storage dtype, relative to max(1, max|ref|).
double absolute_slack(DType dtype);

}  // namespace flashgen::testing
