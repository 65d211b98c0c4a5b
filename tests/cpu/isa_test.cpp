// The whole CPU backend run with every instruction set this machine has
// (not only the one the dispatcher picks), against the fp64 reference
// (determinism_test.cpp checks each for thread-count independence).
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "attention_case.hpp"
#include "active_kernels.hpp"
#include "attention_check.hpp"
#include "cpu/isa_dispatch.hpp"
#include "score_options.hpp"

namespace flashgen::testing {
namespace {

using cpu::TileKernels;

// Whole and partial blocks, odd and large dimensions, GQA, causal rows that
// see no key, every dtype.
std::vector<Case> isa_cases() {
  return {
      {1, 130, 200, 4, 2, 64, 64, false, DType::bf16, Layout::bshd},
      {1, 77, 129, 2, 1, 127, 127, true, DType::bf16, Layout::bhsd},
      {2, 64, 64, 2, 2, 256, 256, false, DType::bf16, Layout::bshd},
      {1, 96, 70, 3, 1, 40, 72, true, DType::bf16, Layout::padded},
      {1, 130, 200, 4, 2, 128, 128, false, DType::f32, Layout::bshd},
      {1, 77, 129, 2, 1, 127, 127, true, DType::f32, Layout::bhsd},
      {1, 64, 33, 2, 2, 3, 5, false, DType::f32, Layout::padded},
      {1, 100, 100, 2, 1, 96, 96, true, DType::f16, Layout::bshd},
  };
}

class CpuIsa : public ::testing::TestWithParam<std::tuple<const TileKernels*, Case>> {};

TEST_P(CpuIsa, ForwardAndBackwardMatchReference) {
  const auto& [kernels, c] = GetParam();
  ActiveKernels scope(*kernels);
  Options options;
  options.backend = Backend::cpu;
  EXPECT_TRUE(check_forward(c, options));
  EXPECT_TRUE(check_backward(c, options));
}

// The masks and score modifiers run outside the tile kernels
// (score_mods.hpp) but feed them shifted visible ranges and rewritten
// scores: every instruction set with all of them on.
TEST_P(CpuIsa, ScoreModifiersMatchReference) {
  const auto& [kernels, c] = GetParam();
  ActiveKernels scope(*kernels);
  ScoreOptions mods({40, 8, 2.5, 2, true, CausalAlignment::top_left}, c);
  EXPECT_TRUE(check_forward(c, mods.options()));
  EXPECT_TRUE(check_backward(c, mods.options()));
}

INSTANTIATE_TEST_SUITE_P(
    Runnable, CpuIsa,
    ::testing::Combine(::testing::ValuesIn(cpu::runnable_tile_kernels()),
                       ::testing::ValuesIn(isa_cases())),
    [](const ::testing::TestParamInfo<std::tuple<const TileKernels*, Case>>& info) {
      return std::string(std::get<0>(info.param)->name) + "_" + std::get<1>(info.param).to_string();
    });

}  // namespace
}  // namespace flashgen::testing
