// Host tensors of one small attention problem, for the API tests: every
// tensor owns its bytes, args() views them packed (BSHD), and each test
// breaks one rule on a copy of the args.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "flashgen/flashgen.hpp"

namespace flashgen::testing {

struct ProblemShape {
  std::int64_t batch = 2, seq_q = 5, seq_kv = 7, heads_q = 4, heads_kv = 2, dim_qk = 8, dim_v = 6;
  DType dtype = DType::f32;
};

class HostProblem {
 public:
  explicit HostProblem(const ProblemShape& shape = {});

  ForwardArgs forward_args();
  BackwardArgs backward_args();

  // Fills the inputs with values in [-1, 1] (deterministic in `seed`).
  void fill_inputs(unsigned seed);
  // Sets every byte of the outputs (o, lse, gradients) to `byte` (a guard pattern).
  void poison_outputs(unsigned char byte);

  const ProblemShape& shape() const { return shape_; }
  std::vector<unsigned char> q, k, v, o, grad_o, grad_q, grad_k, grad_v;  // [B, S, H, D]
  std::vector<float> lse;                                                 // [B, Hq, Sq]

 private:
  ProblemShape shape_;
};

// Asserts that the planner, the computing call and supports_*() all refuse
// `args` with `code`, and that the message contains every fragment (the
// argument's name and the rule).
void expect_refused(const ForwardArgs& args, const Options& options, ErrorCode code,
                    const std::vector<std::string>& fragments);
void expect_refused(const BackwardArgs& args, const Options& options, ErrorCode code,
                    const std::vector<std::string>& fragments);

}  // namespace flashgen::testing
