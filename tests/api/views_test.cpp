// The public view constructors and enum names.
#include <gtest/gtest.h>

#include <cstring>

#include "flashgen/flashgen.h"
#include "flashgen/flashgen.hpp"

namespace flashgen {
namespace {

TEST(Views, BshdIsPackedWithDimFastest) {
  int storage = 0;
  const TensorView t = TensorView::bshd(&storage, DType::f16, 2, 5, 3, 7, MemoryKind::cuda, 1);
  EXPECT_EQ(t.data, &storage);
  EXPECT_EQ(t.dtype, DType::f16);
  EXPECT_EQ(t.batch(), 2);
  EXPECT_EQ(t.seq(), 5);
  EXPECT_EQ(t.heads(), 3);
  EXPECT_EQ(t.dim(), 7);
  EXPECT_EQ(t.stride[3], 1);
  EXPECT_EQ(t.stride[2], 7);
  EXPECT_EQ(t.stride[1], 3 * 7);
  EXPECT_EQ(t.stride[0], 5 * 3 * 7);
  EXPECT_EQ(t.memory, MemoryKind::cuda);
  EXPECT_EQ(t.device, 1);
  EXPECT_EQ(t.numel(), 2 * 5 * 3 * 7);
}

TEST(Views, BhsdKeepsAxesButStoresHeadsBeforeSeq) {
  const TensorView t = TensorView::bhsd(nullptr, DType::bf16, 2, 5, 3, 7);
  EXPECT_EQ(t.shape[1], 5);  // seq
  EXPECT_EQ(t.shape[2], 3);  // heads
  EXPECT_EQ(t.stride[3], 1);
  EXPECT_EQ(t.stride[1], 7);
  EXPECT_EQ(t.stride[2], 5 * 7);
  EXPECT_EQ(t.stride[0], 3 * 5 * 7);
  EXPECT_EQ(t.memory, MemoryKind::host);
}

TEST(Views, RowStatsContiguousIsBatchHeadsSeq) {
  float value = 0;
  const RowStatsView t = RowStatsView::contiguous(&value, 2, 3, 11);
  EXPECT_EQ(t.data, &value);
  EXPECT_EQ(t.shape[0], 2);
  EXPECT_EQ(t.shape[1], 3);
  EXPECT_EQ(t.shape[2], 11);
  EXPECT_EQ(t.stride[2], 1);
  EXPECT_EQ(t.stride[1], 11);
  EXPECT_EQ(t.stride[0], 3 * 11);
}

TEST(Views, NamesAndSizes) {
  EXPECT_STREQ(to_string(DType::f16), "f16");
  EXPECT_STREQ(to_string(DType::bf16), "bf16");
  EXPECT_STREQ(to_string(DType::f32), "f32");
  EXPECT_EQ(size_of(DType::f16), 2u);
  EXPECT_EQ(size_of(DType::bf16), 2u);
  EXPECT_EQ(size_of(DType::f32), 4u);
  EXPECT_EQ(size_of(static_cast<DType>(9)), 0u);
  EXPECT_STREQ(to_string(Backend::automatic), "automatic");
  EXPECT_STREQ(to_string(Backend::cuda), "cuda");
  EXPECT_STREQ(to_string(Backend::cpu), "cpu");
}

TEST(Views, VersionIsTheProjectVersion) {
  EXPECT_STREQ(version(), FLASHGEN_VERSION);
  EXPECT_STREQ(fg_version(), FLASHGEN_VERSION);
  EXPECT_GT(std::strlen(version()), 0u);
}

}  // namespace
}  // namespace flashgen
