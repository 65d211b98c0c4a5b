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
// atol = absolute_slack(dtype) · max(1, max |ref|). It matters only where the
// naive computation is exact by accident (one visible key gives P = 1, so the
// naive O = V and dS = 0 exactly) while a tiled computation still carries the
// fp32 rounding of sums taken in another order (dP - Dterm cancels to ~1e-7,
// not 0). f32: 4e-6, a few tens of fp32 ulps, the size of that noise. f16 and
// bf16: 1e-5, the same noise with room for the larger gradients of 16-bit
// inputs, still two orders below one ulp of the output (9.8e-4 f16, 7.8e-3
// bf16), so for them the 2 · naive term decides. LSE is fp32 for every dtype
// and uses the f32 slack.
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
