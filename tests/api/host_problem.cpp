#include "host_problem.hpp"

#include <cstring>
#include <random>

#include "common/dtype.hpp"

namespace flashgen::testing {
namespace {

std::vector<unsigned char> bytes_for(std::int64_t b, std::int64_t s, std::int64_t h,
                                     std::int64_t d, DType dtype) {
  return std::vector<unsigned char>(static_cast<std::size_t>(b * s * h * d) * size_of(dtype));
}

void fill_random(std::vector<unsigned char>& bytes, DType dtype, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::size_t count = bytes.size() / size_of(dtype);
  for (std::size_t i = 0; i < count; ++i)
    store_from_float(bytes.data(), dtype, static_cast<std::int64_t>(i), uniform(rng));
}

void* data_or_null(std::vector<unsigned char>& bytes) {
  return bytes.empty() ? nullptr : bytes.data();
}

template <class Args>
void expect_refused_impl(const Args& args, const Options& options, ErrorCode code,
                         const std::vector<std::string>& fragments, const Plan& plan,
                         bool supported, void (*call)(const Args&, const Options&)) {
  EXPECT_FALSE(plan.ok);
  EXPECT_EQ(plan.error, code) << plan.reason;
  EXPECT_FALSE(supported);
  EXPECT_TRUE(plan.kernels.empty());
  for (const std::string& fragment : fragments)
    EXPECT_NE(plan.reason.find(fragment), std::string::npos)
        << "plan.reason \"" << plan.reason << "\" lacks \"" << fragment << "\"";
  try {
    call(args, options);
    ADD_FAILURE() << "the call accepted arguments the planner refused";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), code) << error.what();
    EXPECT_EQ(plan.reason, error.what());  // one planner, one message
  }
}

}  // namespace

HostProblem::HostProblem(const ProblemShape& s) : shape_(s) {
  q = bytes_for(s.batch, s.seq_q, s.heads_q, s.dim_qk, s.dtype);
  k = bytes_for(s.batch, s.seq_kv, s.heads_kv, s.dim_qk, s.dtype);
  v = bytes_for(s.batch, s.seq_kv, s.heads_kv, s.dim_v, s.dtype);
  o = bytes_for(s.batch, s.seq_q, s.heads_q, s.dim_v, s.dtype);
  grad_o = o;
  grad_q = q;
  grad_k = k;
  grad_v = v;
  lse.assign(static_cast<std::size_t>(s.batch * s.heads_q * s.seq_q), 0.0f);
}

ForwardArgs HostProblem::forward_args() {
  const ProblemShape& s = shape_;
  ForwardArgs a;
  a.q = TensorView::bshd(data_or_null(q), s.dtype, s.batch, s.seq_q, s.heads_q, s.dim_qk);
  a.k = TensorView::bshd(data_or_null(k), s.dtype, s.batch, s.seq_kv, s.heads_kv, s.dim_qk);
  a.v = TensorView::bshd(data_or_null(v), s.dtype, s.batch, s.seq_kv, s.heads_kv, s.dim_v);
  a.o = TensorView::bshd(data_or_null(o), s.dtype, s.batch, s.seq_q, s.heads_q, s.dim_v);
  a.lse = RowStatsView::contiguous(lse.empty() ? nullptr : lse.data(), s.batch, s.heads_q,
                                   s.seq_q);
  return a;
}

BackwardArgs HostProblem::backward_args() {
  const ProblemShape& s = shape_;
  const ForwardArgs f = forward_args();
  BackwardArgs a;
  a.q = f.q;
  a.k = f.k;
  a.v = f.v;
  a.o = f.o;
  a.lse = f.lse;
  a.grad_o = TensorView::bshd(data_or_null(grad_o), s.dtype, s.batch, s.seq_q, s.heads_q, s.dim_v);
  a.grad_q = TensorView::bshd(data_or_null(grad_q), s.dtype, s.batch, s.seq_q, s.heads_q, s.dim_qk);
  a.grad_k =
      TensorView::bshd(data_or_null(grad_k), s.dtype, s.batch, s.seq_kv, s.heads_kv, s.dim_qk);
  a.grad_v =
      TensorView::bshd(data_or_null(grad_v), s.dtype, s.batch, s.seq_kv, s.heads_kv, s.dim_v);
  return a;
}

void HostProblem::fill_inputs(unsigned seed) {
  std::mt19937 rng(seed);
  for (auto* bytes : {&q, &k, &v, &grad_o}) fill_random(*bytes, shape_.dtype, rng);
}

void HostProblem::poison_outputs(unsigned char byte) {
  for (auto* bytes : {&o, &grad_q, &grad_k, &grad_v})
    if (!bytes->empty()) std::memset(bytes->data(), byte, bytes->size());
  if (!lse.empty()) std::memset(lse.data(), byte, lse.size() * sizeof(float));
}

void expect_refused(const ForwardArgs& args, const Options& options, ErrorCode code,
                    const std::vector<std::string>& fragments) {
  expect_refused_impl<ForwardArgs>(args, options, code, fragments, plan_forward(args, options),
                                   supports_forward(args, options), &forward);
}

void expect_refused(const BackwardArgs& args, const Options& options, ErrorCode code,
                    const std::vector<std::string>& fragments) {
  expect_refused_impl<BackwardArgs>(args, options, code, fragments, plan_backward(args, options),
                                    supports_backward(args, options), &backward);
}

}  // namespace flashgen::testing
