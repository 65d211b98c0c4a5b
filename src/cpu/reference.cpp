#include "cpu/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/dtype.hpp"
#include "cpu/thread_pool.hpp"

namespace flashgen::cpu {
namespace {

// Where intermediates are rounded: never for the fp64 reference; to the
// storage dtype for the naive same-dtype computation (Real = float).
template <class Real>
struct Rounding {
  bool enabled = false;
  DType dtype = DType::f32;
  Real operator()(Real x) const {
    return enabled ? static_cast<Real>(round_to_dtype(static_cast<float>(x), dtype)) : x;
  }
};

// Packed BSHD offsets.
std::int64_t offset(std::int64_t seq_len, std::int64_t heads,
                    std::int64_t dim, std::int64_t b, std::int64_t s, std::int64_t h) {
  return ((b * seq_len + s) * heads + h) * dim;
}

// One task = one (batch, kv head): its query heads' O, LSE, dQ and the kv
// head's dK, dV. Scores are formed one query row at a time (the row is the
// unit of softmax), so memory stays O(seq_kv) per task.
template <class Real>
void attention_for_kv_head(const Problem& p, const PackedInputs& in, Rounding<Real> round,
                           std::int64_t b, std::int64_t kv_head, ForwardResult& fwd,
                           BackwardResult* bwd, std::vector<double>& grad_sink_rows) {
  const std::int64_t dqk = p.dim_qk, dv = p.dim_v, skv = p.seq_kv;
  const Real scale = static_cast<Real>(p.scale);

  // This kv head's K, Kᵀ and V in Real; V is the dtype's values already.
  std::vector<Real> k(skv * dqk), k_transposed(dqk * skv), v(skv * dv), v_transposed(dv * skv);
  for (std::int64_t j = 0; j < skv; ++j) {
    const double* k_row = in.k.data() + offset(skv, p.heads_kv, dqk, b, j, kv_head);
    const double* v_row = in.v.data() + offset(skv, p.heads_kv, dv, b, j, kv_head);
    for (std::int64_t d = 0; d < dqk; ++d) {
      k[j * dqk + d] = k_transposed[d * skv + j] = static_cast<Real>(k_row[d]);
    }
    for (std::int64_t d = 0; d < dv; ++d) {
      v[j * dv + d] = v_transposed[d * skv + j] = static_cast<Real>(v_row[d]);
    }
  }
  std::vector<Real> grad_k_acc(bwd ? skv * dqk : 0, Real(0));  // [seq_kv, dim_qk]
  std::vector<Real> grad_v_acc(bwd ? skv * dv : 0, Real(0));   // [seq_kv, dim_v]

  std::vector<Real> q(dqk), grad_o(dv), o(dv), grad_q(dqk);
  std::vector<Real> s(skv), dp(skv);  // one row of S then P; of dP then dS
  std::vector<Real> softcap_slope(p.softcap > 0 ? skv : 0);  // 1 - tanh² of the row
  std::vector<char> attended(p.has_mask() ? skv : 0);        // the user mask of the row
  for (std::int64_t head = kv_head * p.group_size(); head < (kv_head + 1) * p.group_size();
       ++head) {
    for (std::int64_t i = 0; i < p.seq_q; ++i) {
      const std::int64_t q_at = offset(p.seq_q, p.heads_q, dqk, b, i, head);
      const std::int64_t o_at = offset(p.seq_q, p.heads_q, dv, b, i, head);
      const std::int64_t lse_at = (b * p.heads_q + head) * p.seq_q + i;
      for (std::int64_t d = 0; d < dqk; ++d) q[d] = static_cast<Real>(in.q[q_at + d]);

      // Keys [lo, hi) are visible (causal and window masks).
      const RowRange keys = visible_keys(p, i);
      const std::int64_t lo = keys.begin, hi = keys.end;
      const bool sink = p.has_sinks();
      const Real sink_logit = sink ? static_cast<Real>(p.sink(head)) : Real(0);
      // The user mask, evaluated pair by pair on the visible keys alone.
      bool any_attended = !keys.empty();
      if (p.has_mask()) {
        any_attended = false;
        for (std::int64_t j = lo; j < hi; ++j) {
          // q_idx: row i's position among the keys (the diagonal).
          attended[j] =
              mask::attends(*p.mask, {p.mask_batch0 + b, head, i + p.diagonal_offset(), j});
          any_attended |= attended[j] != 0;
        }
      }
      if (!any_attended) {
        // No key: O = 0, and LSE = -inf, or the sink's logit (P_sink = 1,
        // whose gradient -P_sink · Dterm is 0 since O = 0).
        std::fill(fwd.o.begin() + o_at, fwd.o.begin() + o_at + dv, 0.0);
        fwd.lse[lse_at] = sink ? static_cast<double>(sink_logit)
                               : -std::numeric_limits<double>::infinity();
        if (bwd) std::fill(bwd->grad_q.begin() + q_at, bwd->grad_q.begin() + q_at + dqk, 0.0);
        continue;
      }

      // s = scale · q·Kᵀ over the visible keys (accumulated in Real), then
      // the soft cap (with its derivative for the backward) and ALiBi.
      std::fill(s.begin() + lo, s.begin() + hi, Real(0));
      for (std::int64_t d = 0; d < dqk; ++d) {
        const Real qd = q[d];
        const Real* kt = k_transposed.data() + d * skv;
        for (std::int64_t j = lo; j < hi; ++j) s[j] += qd * kt[j];
      }
      const Real softcap = static_cast<Real>(p.softcap);
      const Real slope = static_cast<Real>(p.alibi_slope(b, head));
      const std::int64_t diagonal = i + p.diagonal_offset();
      Real row_max = sink ? sink_logit : -std::numeric_limits<Real>::infinity();
      for (std::int64_t j = lo; j < hi; ++j) {
        s[j] *= scale;
        if (softcap > 0) {
          const Real t = std::tanh(s[j] / softcap);
          s[j] = softcap * t;
          softcap_slope[j] = 1 - t * t;
        }
        s[j] -= slope * static_cast<Real>(std::abs(diagonal - j));
        // A masked pair: exp gives P = 0, so neither O nor a gradient sees it.
        if (p.has_mask() && !attended[j]) s[j] = -std::numeric_limits<Real>::infinity();
        row_max = std::max(row_max, s[j]);
      }
      Real sum = sink ? std::exp(sink_logit - row_max) : Real(0);
      const Real sink_term = sum;
      for (std::int64_t j = lo; j < hi; ++j) {
        s[j] = std::exp(s[j] - row_max);
        sum += s[j];
      }
      for (std::int64_t j = lo; j < hi; ++j) s[j] = round(s[j] / sum);  // P
      const Real p_sink = sink_term / sum;
      fwd.lse[lse_at] = static_cast<double>(row_max + std::log(sum));

      // o = P·V
      std::fill(o.begin(), o.end(), Real(0));
      for (std::int64_t j = lo; j < hi; ++j) {
        const Real pj = s[j];
        const Real* vj = v.data() + j * dv;
        for (std::int64_t d = 0; d < dv; ++d) o[d] += pj * vj[d];
      }
      for (std::int64_t d = 0; d < dv; ++d) {
        o[d] = round(o[d]);
        fwd.o[o_at + d] = static_cast<double>(o[d]);
      }
      if (!bwd) continue;

      // Dterm = dO·o (= Σ_j P_ij dP_ij); dP = dO·Vᵀ; dS = P ∘ (dP - Dterm).
      for (std::int64_t d = 0; d < dv; ++d) grad_o[d] = static_cast<Real>(in.grad_o[o_at + d]);
      Real dterm = 0;
      for (std::int64_t d = 0; d < dv; ++d) dterm += grad_o[d] * o[d];
      std::fill(dp.begin() + lo, dp.begin() + hi, Real(0));
      for (std::int64_t d = 0; d < dv; ++d) {
        const Real gd = grad_o[d];
        const Real* vt = v_transposed.data() + d * skv;
        for (std::int64_t j = lo; j < hi; ++j) dp[j] += gd * vt[j];
      }
      for (std::int64_t j = lo; j < hi; ++j) {
        dp[j] = round(s[j] * (round(dp[j]) - dterm));
        // Through the soft cap: d(c·tanh(x/c))/dx = 1 - tanh²(x/c).
        if (softcap > 0) dp[j] = round(dp[j] * softcap_slope[j]);
      }
      // The sink's column: dP_sink = 0 (no value), so dS_sink = -P_sink · Dterm.
      if (sink) grad_sink_rows[b * p.heads_q + head] -= static_cast<double>(p_sink * dterm);

      // dQ = scale · dS·K; dK += dSᵀ·q; dV += Pᵀ·dO (scaled and rounded at the end).
      std::fill(grad_q.begin(), grad_q.end(), Real(0));
      for (std::int64_t j = lo; j < hi; ++j) {
        const Real dsj = dp[j], pj = s[j];
        const Real* kj = k.data() + j * dqk;
        Real* gk = grad_k_acc.data() + j * dqk;
        Real* gv = grad_v_acc.data() + j * dv;
        for (std::int64_t d = 0; d < dqk; ++d) {
          grad_q[d] += dsj * kj[d];
          gk[d] += dsj * q[d];
        }
        for (std::int64_t d = 0; d < dv; ++d) gv[d] += pj * grad_o[d];
      }
      for (std::int64_t d = 0; d < dqk; ++d) {
        bwd->grad_q[q_at + d] = static_cast<double>(round(scale * grad_q[d]));
      }
    }
  }
  if (!bwd) return;
  for (std::int64_t j = 0; j < skv; ++j) {
    const std::int64_t k_at = offset(skv, p.heads_kv, dqk, b, j, kv_head);
    const std::int64_t v_at = offset(skv, p.heads_kv, dv, b, j, kv_head);
    for (std::int64_t d = 0; d < dqk; ++d) {
      bwd->grad_k[k_at + d] = static_cast<double>(round(scale * grad_k_acc[j * dqk + d]));
    }
    for (std::int64_t d = 0; d < dv; ++d) {
      bwd->grad_v[v_at + d] = static_cast<double>(round(grad_v_acc[j * dv + d]));
    }
  }
}

template <class Real>
void run_attention(const Problem& p, const PackedInputs& in, Rounding<Real> round, int threads,
                   ForwardResult& fwd, BackwardResult* bwd) {
  fwd.o.assign(p.batch * p.seq_q * p.heads_q * p.dim_v, 0.0);
  fwd.lse.assign(p.batch * p.heads_q * p.seq_q, 0.0);
  if (bwd) {
    if (in.grad_o.size() != fwd.o.size()) {
      throw Error(ErrorCode::invalid_argument, "reference backward: grad_o is missing");
    }
    bwd->grad_q.assign(p.batch * p.seq_q * p.heads_q * p.dim_qk, 0.0);
    bwd->grad_k.assign(p.batch * p.seq_kv * p.heads_kv * p.dim_qk, 0.0);
    bwd->grad_v.assign(p.batch * p.seq_kv * p.heads_kv * p.dim_v, 0.0);
  }
  // The sinks' gradient per (batch, query head), summed over batches in order after.
  std::vector<double> grad_sink_rows(bwd && p.has_sinks() ? p.batch * p.heads_q : 0, 0.0);
  parallel_for(p.batch * p.heads_kv, threads, [&](std::int64_t task) {
    attention_for_kv_head<Real>(p, in, round, task / p.heads_kv, task % p.heads_kv, fwd, bwd,
                                grad_sink_rows);
  });
  if (grad_sink_rows.empty()) return;
  bwd->grad_sinks.assign(p.heads_q, 0.0);
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      bwd->grad_sinks[h] += grad_sink_rows[b * p.heads_q + h];
  }
}

}  // namespace

std::vector<double> to_packed_double(const TensorView& t) {
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  std::size_t at = 0;
  for (std::int64_t b = 0; b < t.shape[0]; ++b) {
    for (std::int64_t s = 0; s < t.shape[1]; ++s) {
      for (std::int64_t h = 0; h < t.shape[2]; ++h) {
        const std::int64_t row = b * t.stride[0] + s * t.stride[1] + h * t.stride[2];
        for (std::int64_t d = 0; d < t.shape[3]; ++d) {
          out[at++] = load_as_float(t.data, t.dtype, row + d * t.stride[3]);
        }
      }
    }
  }
  return out;
}

PackedInputs pack_inputs(const TensorView& q, const TensorView& k, const TensorView& v,
                         const TensorView* grad_o) {
  PackedInputs in;
  in.q = to_packed_double(q);
  in.k = to_packed_double(k);
  in.v = to_packed_double(v);
  if (grad_o) in.grad_o = to_packed_double(*grad_o);
  return in;
}

ForwardResult reference_forward(const Problem& p, const PackedInputs& in, int threads) {
  ForwardResult fwd;
  run_attention<double>(p, in, Rounding<double>{}, threads, fwd, nullptr);
  return fwd;
}

BackwardResult reference_backward(const Problem& p, const PackedInputs& in, int threads,
                                  ForwardResult* forward) {
  ForwardResult fwd;
  BackwardResult bwd;
  run_attention<double>(p, in, Rounding<double>{}, threads, fwd, &bwd);
  if (forward) *forward = std::move(fwd);
  return bwd;
}

ForwardResult naive_same_dtype_forward(const Problem& p, const PackedInputs& in, int threads) {
  ForwardResult fwd;
  run_attention<float>(p, in, Rounding<float>{true, p.dtype}, threads, fwd, nullptr);
  return fwd;
}

BackwardResult naive_same_dtype_backward(const Problem& p, const PackedInputs& in, int threads,
                                         ForwardResult* forward) {
  ForwardResult fwd;
  BackwardResult bwd;
  run_attention<float>(p, in, Rounding<float>{true, p.dtype}, threads, fwd, &bwd);
  if (forward) *forward = std::move(fwd);
  return bwd;
}

}  // namespace flashgen::cpu
