// How a forward runs: with a group's query heads packed as rows (decode,
// query_head_packing.hpp), and with each query block's keys shared by
// several CTAs whose partial results a combine merges (the split-key
// forward) where the query blocks alone leave SMs idle.
#pragma once

#include "cuda/query_head_packing.hpp"

namespace flashgen::cuda {

// How a forward runs: the call as the kernels see it (query heads packed as
// rows in decode) and the key shares of the split-key forward (0: the whole
// forward kernel). Sinks read by row are the combine's alone, so a packed
// call with sinks takes the split-key forward even with one share, and is
// not packed where that kernel does not serve it.
struct ForwardRoute {
  ForwardLaunch launch;
  int splits = 0;
  int vec = 0;  // the alignment class of launch's tensors (kernel_args.hpp)
};

ForwardRoute route_forward(const Problem& problem, const ForwardArgs& call);

// Whether TMA can read the tensors the forward traverses (K and V) for a
// kernel of alignment class `vec`: their own views on 16-byte rows (8),
// their token-row views otherwise (tensor_maps.hpp).
bool forward_tma_readable(const ForwardArgs& a, int vec);

}  // namespace flashgen::cuda
