// The attention sinks' gradient. A sink is a softmax column with logit
// sink[h] and no value, so dP_sink = 0 and its score gradient is
//   dS_sink = P_sink · (0 - Dterm),  P_sink = exp(sink[h] - LSE),  Dterm = rowsum(dO ∘ O);
// the logit is shared by every row of head h in every batch:
//   dL/dsink[h] = -Σ_{b, i} exp(sink[h] - LSE[b, h, i]) · Dterm[b, h, i].
// The LSE the forward returns includes the sink, so nothing else of the
// backward changes.
#pragma once

#include <vector>

#include "common/problem.hpp"

namespace flashgen::cpu {

// dterm: [batch, heads_q, seq_q]. Writes p.grad_sinks; sums in fp64 in a
// fixed order (one head per task), so the result does not depend on threads.
void write_sink_gradient(const Problem& p, const RowStatsView& lse,
                         const std::vector<float>& dterm, int threads);

}  // namespace flashgen::cpu
