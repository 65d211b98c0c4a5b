// The CPU flash backend: the same tiled online-softmax algorithm the GPU
// kernels use, multithreaded, bit-identical for any thread count.
#pragma once

#include "common/problem.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cpu {

// threads <= 0: all hardware threads.
void forward(const Problem& p, const ForwardArgs& args, int threads);
void backward(const Problem& p, const BackwardArgs& args, int threads);

}  // namespace flashgen::cpu
