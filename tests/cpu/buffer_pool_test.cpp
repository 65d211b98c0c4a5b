// The pool of large per-call buffers: a released buffer serves the next
// request it is large enough for, and what it keeps stays under its cap.
#include <cstdint>

#include <gtest/gtest.h>

#include "cpu/buffer_pool.hpp"

namespace flashgen::cpu {
namespace {

TEST(BufferPool, ReusesAReleasedBufferLargeEnough) {
  void* first = nullptr;
  {
    PooledBuffer a = pooled_buffer(std::size_t{3} << 20);
    ASSERT_NE(a.get(), nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.get()) % 64, 0u);
    first = a.get();
  }
  const std::size_t kept = pooled_bytes_retained();
  EXPECT_GE(kept, std::size_t{3} << 20);
  PooledBuffer b = pooled_buffer(std::size_t{2} << 20);
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(pooled_bytes_retained(), kept - (std::size_t{3} << 20));
}

TEST(BufferPool, TakesTheSmallestKeptBufferThatFits) {
  PooledBuffer large = pooled_buffer(std::size_t{8} << 20);
  PooledBuffer small = pooled_buffer(std::size_t{5} << 20);
  void* small_data = small.get();
  large.reset();
  small.reset();
  PooledBuffer again = pooled_buffer(std::size_t{4} << 20);
  EXPECT_EQ(again.get(), small_data);
}

TEST(BufferPool, KeepsNoMoreThanItsCap) {
  { PooledBuffer huge = pooled_buffer(kRetainedBytes + 64); }
  EXPECT_LE(pooled_bytes_retained(), kRetainedBytes);
  PooledBuffer empty = pooled_buffer(0);
  EXPECT_EQ(empty.get(), nullptr);
}

TEST(BufferPool, LimitFromTheEnvironmentInWholeMebibytes) {
  EXPECT_EQ(retained_limit_from(nullptr), kRetainedBytes);
  EXPECT_EQ(retained_limit_from(""), kRetainedBytes);
  EXPECT_EQ(retained_limit_from("0"), 0u);
  EXPECT_EQ(retained_limit_from("64"), std::size_t{64} << 20);
  EXPECT_EQ(retained_limit_from("64MB"), kRetainedBytes);  // not a whole number
  EXPECT_EQ(retained_limit_from("-1"), kRetainedBytes);
}

}  // namespace
}  // namespace flashgen::cpu
