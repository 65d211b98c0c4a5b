// The geometry the TMA kernels' tensor maps are encoded with (no GPU needed):
// dims fastest first, the caller's strides in bytes, the packed stride for a
// dim of size 1, boxes of 8 columns by the traversed rows.
#include <gtest/gtest.h>

#include "cuda/tensor_maps.hpp"

namespace flashgen::cuda {
namespace {

TEST(TensorMapGeometry, DimsFastestFirstWithTheCallersByteStrides) {
  // [batch 2][seq 300][heads 4][dim 128], BSHD: seq stride heads·dim.
  const TensorView t = TensorView::bshd(nullptr, DType::bf16, 2, 300, 4, 128);
  const TensorMapGeometry g = tensor_map_geometry(t, 64);
  EXPECT_EQ(g.dims[0], 128u);
  EXPECT_EQ(g.dims[1], 300u);
  EXPECT_EQ(g.dims[2], 4u);
  EXPECT_EQ(g.dims[3], 2u);
  EXPECT_EQ(g.byte_strides[0], 2u * 4 * 128);        // seq
  EXPECT_EQ(g.byte_strides[1], 2u * 128);            // heads
  EXPECT_EQ(g.byte_strides[2], 2u * 300 * 4 * 128);  // batch
  EXPECT_EQ(g.box[0], 8u);
  EXPECT_EQ(g.box[1], 64u);
  EXPECT_EQ(g.box[2], 1u);
  EXPECT_EQ(g.box[3], 1u);
}

TEST(TensorMapGeometry, BhsdStridesAreReadAsTheyAre) {
  const TensorView t = TensorView::bhsd(nullptr, DType::f16, 1, 77, 3, 40);
  const TensorMapGeometry g = tensor_map_geometry(t, 32);
  EXPECT_EQ(g.byte_strides[0], 2u * 40);       // seq
  EXPECT_EQ(g.byte_strides[1], 2u * 77 * 40);  // heads
}

TEST(TensorMapGeometry, ADimOfOneGetsAStrideTmaAccepts) {
  // One head and one batch: their strides are never stepped and may be
  // anything; TMA still needs multiples of 16 bytes.
  TensorView t = TensorView::bshd(nullptr, DType::bf16, 1, 100, 1, 72);
  t.stride[2] = 3;  // a stride of a size-1 dim, as views may carry
  t.stride[0] = 5;
  const TensorMapGeometry g = tensor_map_geometry(t, 128);
  EXPECT_EQ(g.byte_strides[0], 2u * 72);  // seq, the caller's
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(g.byte_strides[i] % 16, 0u) << i;
    EXPECT_GE(g.byte_strides[i], 2u * 72 * 100) << i;
  }
}

TEST(TensorMapGeometry, TheSlicedViewStepsSlicesBetweenRowsAndHeads) {
  // D = 300 in 32-byte-swizzled slices of 16 columns: 18 whole slices (the
  // 12 columns after them are the per-slice view's), one box of them all.
  const TensorView t = TensorView::bshd(nullptr, DType::bf16, 2, 1000, 4, 300);
  const TensorMapGeometry g = sliced_tensor_map_geometry(t, 32, 16);
  EXPECT_EQ(g.rank, 5u);
  const unsigned long long dims[5] = {16, 1000, 18, 4, 2};
  const unsigned long long strides[4] = {2u * 4 * 300, 2u * 16, 2u * 300, 2u * 1000 * 4 * 300};
  const unsigned box[5] = {16, 32, 18, 1, 1};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(g.dims[i], dims[i]) << i;
    EXPECT_EQ(g.box[i], box[i]) << i;
    if (i < 4) EXPECT_EQ(g.byte_strides[i], strides[i]) << i;
  }
  // The per-slice view of the same tensor has rank 4.
  EXPECT_EQ(tensor_map_geometry(t, 32, 16).rank, 4u);
}

TEST(TensorMapGeometry, TheSlicedTokenRowViewStepsSlicesAlongTheRow) {
  // 16 heads of D = 385 (6160 columns a token: 385 slices of 16), a head's
  // tile of 400 columns (25 slices) in one box.
  const TensorView t = TensorView::bshd(nullptr, DType::bf16, 2, 1000, 16, 385);
  const TensorMapGeometry g = sliced_token_row_geometry(t, 32, 16, 25);
  EXPECT_EQ(g.rank, 4u);
  const unsigned long long dims[4] = {16, 1000, 385, 2};
  const unsigned long long strides[3] = {2u * 16 * 385, 2u * 16, 2u * 1000 * 16 * 385};
  const unsigned box[4] = {16, 32, 25, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(g.dims[i], dims[i]) << i;
    EXPECT_EQ(g.box[i], box[i]) << i;
    if (i < 3) EXPECT_EQ(g.byte_strides[i], strides[i]) << i;
  }
  // 8 heads of 127: 1016 columns, 63 whole slices (the last 8 columns are
  // the per-slice view's).
  EXPECT_EQ(sliced_token_row_geometry(TensorView::bshd(nullptr, DType::bf16, 1, 300, 8, 127),
                                      64, 16, 9)
                .dims[2],
            63u);
}

TEST(TmaCanRead, PackedAndStridedViewsButNotBroadcastOnes) {
  EXPECT_TRUE(tma_can_read(TensorView::bshd(nullptr, DType::bf16, 2, 300, 4, 128)));
  EXPECT_TRUE(tma_can_read(TensorView::bhsd(nullptr, DType::f16, 3, 77, 5, 40)));
  // K shared by the batch through a zero stride (a broadcast view).
  TensorView shared = TensorView::bshd(nullptr, DType::bf16, 2, 300, 4, 128);
  shared.stride[0] = 0;
  EXPECT_FALSE(tma_can_read(shared));
  // A zero stride on a dim of size 1 is never stepped.
  shared.shape[0] = 1;
  EXPECT_TRUE(tma_can_read(shared));
  // Strides of 2^40 bytes or more cannot be encoded.
  TensorView far = TensorView::bshd(nullptr, DType::bf16, 2, 300, 4, 128);
  far.stride[0] = std::int64_t{1} << 39;
  EXPECT_FALSE(tma_can_read(far));
}

}  // namespace
}  // namespace flashgen::cuda
