// forward() / backward() through the public API on the host: the plan's
// backend runs, every output element is written, and nothing the caller
// passed is modified.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "attention_check.hpp"
#include "host_problem.hpp"

namespace flashgen::testing {
namespace {

TEST(Attention, InputsAreNeverModified) {
  HostProblem problem;
  problem.fill_inputs(7);
  const std::vector<unsigned char> q = problem.q, k = problem.k, v = problem.v,
                                   grad_o = problem.grad_o;
  const ForwardArgs forward_args = problem.forward_args();
  ForwardArgs forward_copy = forward_args;
  forward(forward_args);
  EXPECT_EQ(problem.q, q);
  EXPECT_EQ(problem.k, k);
  EXPECT_EQ(problem.v, v);
  EXPECT_EQ(std::memcmp(&forward_copy, &forward_args, sizeof(ForwardArgs)), 0);

  const std::vector<unsigned char> o = problem.o;
  const std::vector<float> lse = problem.lse;
  backward(problem.backward_args());
  EXPECT_EQ(problem.q, q);
  EXPECT_EQ(problem.k, k);
  EXPECT_EQ(problem.v, v);
  EXPECT_EQ(problem.grad_o, grad_o);
  EXPECT_EQ(problem.o, o);
  EXPECT_EQ(std::memcmp(problem.lse.data(), lse.data(), lse.size() * sizeof(float)), 0);
}

TEST(Attention, EveryOutputIsWritten) {
  HostProblem problem;
  problem.fill_inputs(8);
  problem.poison_outputs(0xff);  // NaN in every dtype
  forward(problem.forward_args());
  backward(problem.backward_args());
  for (const std::vector<unsigned char>* bytes :
       {&problem.o, &problem.grad_q, &problem.grad_k, &problem.grad_v}) {
    const auto* values = reinterpret_cast<const float*>(bytes->data());
    for (std::size_t i = 0; i < bytes->size() / sizeof(float); ++i)
      ASSERT_TRUE(std::isfinite(values[i])) << i;
  }
  for (float value : problem.lse) ASSERT_TRUE(std::isfinite(value));
}

// The shared harness (guards, strided layouts, fp64 reference) through the
// dispatch of this layer: one GQA case with unequal lengths and a causal mask.
TEST(Attention, DispatchMatchesTheReference) {
  Case c;
  c.batch = 2;
  c.seq_q = 9;
  c.seq_kv = 17;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.dim_qk = 24;
  c.dim_v = 16;
  c.causal = true;
  c.layout = Layout::bhsd;
  Options options;
  options.backend = Backend::automatic;
  EXPECT_TRUE(check_forward(c, options));
  EXPECT_TRUE(check_backward(c, options));
}

}  // namespace
}  // namespace flashgen::testing
