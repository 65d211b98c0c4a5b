// The CPU backend reads and writes nothing past a tensor: every tensor of
// these problems ends where a PROT_NONE page begins, so a stray access
// crashes the test instead of passing by luck.
#include <gtest/gtest.h>

#include <vector>

#include "attention_case.hpp"
#include "attention_check.hpp"
#include "device_storage.hpp"

namespace flashgen::testing {
namespace {

Options cpu_options() {
  Options options;
  options.backend = Backend::cpu;
  return options;
}

std::vector<Case> page_end_cases() {
  // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
  std::vector<Case> cases = {Case{1, 33, 65, 2, 1, 127, 127, true, DType::bf16, Layout::bshd},
                             Case{2, 17, 9, 3, 3, 40, 24, false, DType::f16, Layout::bhsd},
                             Case{1, 7, 7, 1, 1, 1, 1, false, DType::f32, Layout::padded}};
  for (Case& c : cases) c.placement = Placement::ends_at_unmapped_page;
  return cases;
}

class CpuPageEnd : public ::testing::TestWithParam<Case> {};

TEST_P(CpuPageEnd, ForwardAndBackwardStayInsideTheTensors) {
  EXPECT_TRUE(check_forward(GetParam(), cpu_options()));
  EXPECT_TRUE(check_backward(GetParam(), cpu_options()));
}

INSTANTIATE_TEST_SUITE_P(Edges, CpuPageEnd, ::testing::ValuesIn(page_end_cases()), CaseName());

// The placement itself: the byte after the storage faults.
TEST(CpuPageEndStorage, TheByteAfterTheStorageFaults) {
  auto storage = make_storage(MemoryKind::host, 1000, Placement::ends_at_unmapped_page);
  volatile unsigned char* end = static_cast<unsigned char*>(storage->data()) + 1000;
  end[-1] = 1;  // the last byte is the storage's
  EXPECT_DEATH(end[0] = 1, "");
}

}  // namespace
}  // namespace flashgen::testing
