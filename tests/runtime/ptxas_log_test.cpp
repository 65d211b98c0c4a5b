// Parsing the verbose ptxas report into KernelResources.
#include <gtest/gtest.h>

#include "cuda/runtime/ptxas_log.hpp"

namespace flashgen::cuda {
namespace {

// As NVRTC 13.0 reports two entries for sm_80 (with cmem) and a
// non-inlined device function inside the second entry's block.
const char* kTwoEntries =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'second' for 'sm_80'\n"
    "ptxas info    : Function properties for second\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]\n"
    "ptxas info    : Compile time = 1.551 ms\n"
    "ptxas info    : Compiling entry function 'write_ids' for 'sm_80'\n"
    "ptxas info    : Function properties for helper_noinline\n"
    "ptxas         .     96 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
    "ptxas info    : Function properties for write_ids\n"
    "ptxas         .     400 bytes stack frame, 24 bytes spill stores, 28 bytes spill loads\n"
    "ptxas info    : Used 255 registers, used 1 barriers, 400 bytes cumulative stack size, "
    "256 bytes smem, 364 bytes cmem[0]\n"
    "ptxas info    : Compile time = 8.278 ms\n";

TEST(PtxasLog, ReadsTheRequestedEntry) {
  KernelResources r;
  ASSERT_TRUE(parse_ptxas_log(kTwoEntries, "write_ids", &r));
  EXPECT_EQ(r.registers, 255);
  EXPECT_EQ(r.stack_frame_bytes, 400);
  EXPECT_EQ(r.spill_store_bytes, 24);
  EXPECT_EQ(r.spill_load_bytes, 28);
  EXPECT_EQ(r.static_shared_bytes, 256);
}

TEST(PtxasLog, OtherEntriesDoNotLeakIn) {
  KernelResources r;
  ASSERT_TRUE(parse_ptxas_log(kTwoEntries, "second", &r));
  EXPECT_EQ(r.registers, 8);
  EXPECT_EQ(r.stack_frame_bytes, 0);
  EXPECT_EQ(r.spill_store_bytes, 0);
  EXPECT_EQ(r.static_shared_bytes, 0);
}

TEST(PtxasLog, MissingEntryAmongSeveralIsReported) {
  KernelResources r;
  r.registers = 7;
  EXPECT_FALSE(parse_ptxas_log(kTwoEntries, "absent", &r));
  EXPECT_EQ(r.registers, 0) << "output must be reset";
}

TEST(PtxasLog, MangledNamesAreNotTheEntry) {
  const char* log =
      "ptxas info    : Compiling entry function '_Z3fooPi' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z3fooPi\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 32 registers, used 0 barriers\n";
  KernelResources r;
  EXPECT_FALSE(parse_ptxas_log(log, "foo", &r));
  ASSERT_TRUE(parse_ptxas_log(log, "_Z3fooPi", &r));
  EXPECT_EQ(r.registers, 32);
}

TEST(PtxasLog, ListsEntryNames) {
  EXPECT_EQ(ptxas_entry_names(kTwoEntries), (std::vector<std::string>{"second", "write_ids"}));
  EXPECT_TRUE(ptxas_entry_names("").empty());
}

TEST(PtxasLog, EmptyLogFindsNothing) {
  KernelResources r;
  EXPECT_FALSE(parse_ptxas_log("", "write_ids", &r));
}

}  // namespace
}  // namespace flashgen::cuda
