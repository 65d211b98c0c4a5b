// The alignment class the CUDA backend derives from the caller's views.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/kernel_args.hpp"

namespace flashgen::cuda {
namespace {

// A fake device address: only its value matters to the alignment class.
void* address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

TEST(AlignmentClass, FollowsPointersAndStrides) {
  const std::uintptr_t base = 0x7f0000000000;  // 256-byte aligned like cudaMalloc
  TensorView d128 = TensorView::bshd(address(base), DType::bf16, 2, 64, 4, 128, MemoryKind::cuda);
  EXPECT_EQ(alignment_class({&d128}), 8);
  TensorView d127 = TensorView::bshd(address(base), DType::bf16, 2, 64, 4, 127, MemoryKind::cuda);
  EXPECT_EQ(alignment_class({&d128, &d127}), 1);  // the least aligned tensor decides
  TensorView d36 = TensorView::bshd(address(base), DType::f16, 2, 64, 4, 36, MemoryKind::cuda);
  EXPECT_EQ(alignment_class({&d36}), 4);
  TensorView shifted = d128;
  shifted.data = address(base + 4);  // a view starting two elements in
  EXPECT_EQ(alignment_class({&shifted}), 2);
}

TEST(AlignmentClass, StridedDimGathers) {
  TensorView t = TensorView::bshd(address(0x1000), DType::bf16, 1, 8, 1, 64, MemoryKind::cuda);
  t.stride[3] = 2;
  EXPECT_EQ(alignment_class({&t}), 0);
  t.shape[3] = 1;  // a single element per row has no dim stride to speak of
  EXPECT_EQ(alignment_class({&t}), 8);
}

TEST(AlignmentClass, TransposedViewsKeepTheirClass) {
  TensorView t = TensorView::bhsd(address(0x10000), DType::bf16, 2, 100, 3, 64, MemoryKind::cuda);
  EXPECT_EQ(alignment_class({&t}), 8);
}

}  // namespace
}  // namespace flashgen::cuda
