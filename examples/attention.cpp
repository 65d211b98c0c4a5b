// The README's C++ API on the CPU backend (host memory, f32): forward and
// backward of a small causal GQA problem, checked by what attention must give.
// Values are the same for every key, so whatever the softmax weights are,
// O equals that value and no gradient reaches Q or K; dV's rows sum to dO's.
#include <cmath>
#include <cstdio>
#include <flashgen/flashgen.hpp>
#include <vector>

int main() {
  using namespace flashgen;
  const int B = 2, S = 33, Hq = 4, Hkv = 2, D = 40, Dv = 24;

  std::vector<float> q(B * S * Hq * D), k(B * S * Hkv * D), v(B * S * Hkv * Dv);
  std::vector<float> o(B * S * Hq * Dv), grad_o(o.size()), lse(B * Hq * S);
  std::vector<float> grad_q(q.size()), grad_k(k.size()), grad_v(v.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * i);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.91f * i);
  for (std::size_t i = 0; i < grad_o.size(); ++i) grad_o[i] = std::sin(1.3f * i);
  // v[b, s, h, d] does not depend on s.
  auto value = [](int b, int h, int d) { return 0.5f * b - 0.25f * h + 0.01f * d; };
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < S; ++s)
      for (int h = 0; h < Hkv; ++h)
        for (int d = 0; d < Dv; ++d) v[((b * S + s) * Hkv + h) * Dv + d] = value(b, h, d);

  // [batch, seq, heads, dim] views of the caller's memory; any strides.
  TensorView tq = TensorView::bshd(q.data(), DType::f32, B, S, Hq, D);
  TensorView tk = TensorView::bshd(k.data(), DType::f32, B, S, Hkv, D);
  TensorView tv = TensorView::bshd(v.data(), DType::f32, B, S, Hkv, Dv);
  TensorView to = TensorView::bshd(o.data(), DType::f32, B, S, Hq, Dv);
  TensorView tdo = TensorView::bshd(grad_o.data(), DType::f32, B, S, Hq, Dv);
  TensorView tdq = TensorView::bshd(grad_q.data(), DType::f32, B, S, Hq, D);
  TensorView tdk = TensorView::bshd(grad_k.data(), DType::f32, B, S, Hkv, D);
  TensorView tdv = TensorView::bshd(grad_v.data(), DType::f32, B, S, Hkv, Dv);
  RowStatsView tlse = RowStatsView::contiguous(lse.data(), B, Hq, S);

  Options options;
  options.causal = true;
  options.backend = Backend::cpu;
  try {
    const Plan plan = plan_forward({tq, tk, tv, to, tlse}, options);
    std::printf("plan: %s, %s\n", to_string(plan.backend),
                plan.kernels.empty() ? "-" : plan.kernels.front().c_str());
    forward({tq, tk, tv, to, tlse}, options);                       // O, LSE
    backward({tq, tk, tv, to, tdo, tlse, tdq, tdk, tdv}, options);  // dQ, dK, dV
  } catch (const Error& error) {
    std::fprintf(stderr, "flashgen: %s\n", error.what());
    return 1;
  }

  double o_error = 0, grad_qk = 0, grad_v_sum_error = 0;
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < S; ++s)
      for (int h = 0; h < Hq; ++h)
        for (int d = 0; d < Dv; ++d) {
          const float expected = value(b, h / (Hq / Hkv), d);
          o_error = std::fmax(o_error, std::fabs(o[((b * S + s) * Hq + h) * Dv + d] - expected));
        }
  for (float g : grad_q) grad_qk = std::fmax(grad_qk, std::fabs(g));
  for (float g : grad_k) grad_qk = std::fmax(grad_qk, std::fabs(g));
  // Each query row's weights sum to 1, so summing dV over keys gives the sum
  // of dO over the query heads of the group.
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hkv; ++h)
      for (int d = 0; d < Dv; ++d) {
        double from_dv = 0, from_do = 0;
        for (int s = 0; s < S; ++s) {
          from_dv += grad_v[((b * S + s) * Hkv + h) * Dv + d];
          for (int g = 0; g < Hq / Hkv; ++g)
            from_do += grad_o[((b * S + s) * Hq + h * (Hq / Hkv) + g) * Dv + d];
        }
        grad_v_sum_error = std::fmax(grad_v_sum_error, std::fabs(from_dv - from_do));
      }
  std::printf("flashgen %s: max |O - V| = %.2e, max |dQ|,|dK| = %.2e, dV sum error = %.2e\n",
              version(), o_error, grad_qk, grad_v_sum_error);
  const bool ok = o_error < 1e-5 && grad_qk < 1e-5 && grad_v_sum_error < 1e-3;
  std::printf("%s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
