// TMA descriptors (CUtensorMap) of the caller's tensors, encoded per call for
// the kernels whose tuning copies with TMA (copy=tma).
#pragma once

#include "cuda/device/params.cuh"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {

// What cuTensorMapEncodeTiled gets for one tensor: `rank` dims fastest
// first, byte strides of all but the first, and the box.
struct TensorMapGeometry {
  unsigned rank;
  unsigned long long dims[5];
  unsigned long long byte_strides[4];
  unsigned box[5];
};

// The geometry of a 16-bit [batch][seq][heads][dim] view read in boxes of
// `box_cols` columns (8, or 16 for 32-byte-swizzled tiles) by `box_rows`
// rows: dims (dim, seq, heads, batch). A dim of size 1 is never stepped,
// but TMA still wants its stride a multiple of 16 bytes: it gets the packed
// one.
TensorMapGeometry tensor_map_geometry(const TensorView& t, int box_rows, int box_cols = 8);

// The sliced view of the same tensor: its whole slices of `slice_cols`
// columns (dim / slice_cols of them, at least one) as dims (slice_cols, seq,
// slice, heads, batch), the slices slice_cols elements apart, read in one
// box of all of them by `box_rows` rows. TMA writes such a box slice after
// slice, each as a box of the view above would be.
TensorMapGeometry sliced_tensor_map_geometry(const TensorView& t, int box_rows, int slice_cols);

// The same of the token-row view below: dims (slice_cols, seq, slice,
// batch), the row's whole slices, read in boxes of `box_slices` slices by
// `box_rows` rows. A head's tile starts at a slice (the 32-byte boundary
// before its first column); one box of the slices its columns span copies
// it where they lie within the row's whole slices.
TensorMapGeometry sliced_token_row_geometry(const TensorView& t, int box_rows, int slice_cols,
                                            int box_slices);

// The token-row view of a [batch][seq][heads][dim] tensor whose heads are
// adjacent in a row (head stride = dim, dim stride 1): dims (heads · dim,
// seq, batch), read in boxes of `box_cols` columns by `box_rows` rows. Its
// only strides are the token's and the batch's, so rows whose own start is
// not 16-byte aligned (odd dims: alignment classes 1, 2, 4) can be read by
// TMA where those two are: head h's column c is column h · dim + c of the
// view. A box past a head's last column holds the next head's first
// columns (zeros past the last head's), which the kernel never lets count
// (kernels/forward/wgmma_producer.cuh).
TensorMapGeometry token_row_tensor_map_geometry(const TensorView& t, int box_rows, int box_cols);

// Whether TMA can describe the view: every stepped dim (size > 1) has a
// positive byte stride below 2^40 (a broadcast view's zero stride cannot be
// encoded) and at most 2^32 elements. Alignment is the caller's rule
// (alignment class 8). TMA also wants every box to start at a whole 16
// bytes along the innermost dim (elsewhere the copy is an illegal
// instruction, whatever the map allows): boxes of the per-head views start
// at a head's column 0 or a slice's, of the token-row views at 32-byte
// boundaries (the kernels shift the head's columns past them).
bool tma_can_read(const TensorView& t);

// Whether TMA can read the tensor through its token-row view: tma_can_read,
// heads adjacent in a row with contiguous dims, a 16-byte aligned pointer,
// token and batch strides of whole 16 bytes, and heads · dim below 2^32.
bool tma_can_read_token_rows(const TensorView& t);

// The two tensors a kernel traverses (K and V for the forward, Q and dO for
// the key/value backward), each a [batch][heads][seq][dim] view of the
// tensor as it is (its own strides), read in boxes of 8 columns by
// `box_rows` rows (swizzle 0), or of 16 columns written swizzled by 32
// bytes (swizzle 32: GeneratedKernel::swizzle); and each one's sliced view
// (sliced_tensor_map_geometry), left zero where it has no whole slice.
// The tensors must be 16-byte aligned with 16-byte aligned strides
// (alignment class 8). With `tiles` (kernels on rows of the other alignment
// classes) each tensor's token-row view instead (tma_can_read_token_rows
// must hold), and its sliced ones (sliced_token_row_geometry) in boxes of
// the slices a head's columns span (two counts: TraversedTensorMaps) where
// those fit the kernel's tile of the given width and the row (a width of
// 0: none). Throws Error(unsupported) when the driver cannot encode tensor
// maps, Error(runtime) when it refuses one.
struct TokenRowTiles {
  int cols[2];  // the kernel's tile of a head of the first and the second tensor
};
flashgen_device::TraversedTensorMaps traversed_tensor_maps(const TensorView& first,
                                                           const TensorView& second, int box_rows,
                                                           int swizzle = 0,
                                                           const TokenRowTiles* tiles = nullptr);

}  // namespace flashgen::cuda
