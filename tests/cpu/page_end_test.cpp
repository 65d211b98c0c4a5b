// The placement the page-end cases rely on (Placement::ends_at_unmapped_page;
// the cases themselves run in attention_test.cpp): the byte after the
// storage faults.
#include <gtest/gtest.h>

#include "device_storage.hpp"

namespace flashgen::testing {
namespace {

TEST(CpuPageEndStorage, TheByteAfterTheStorageFaults) {
  auto storage = make_storage(MemoryKind::host, 1000, Placement::ends_at_unmapped_page);
  volatile unsigned char* end = static_cast<unsigned char*>(storage->data()) + 1000;
  end[-1] = 1;  // the last byte is the storage's
  EXPECT_DEATH(end[0] = 1, "");
}

}  // namespace
}  // namespace flashgen::testing
