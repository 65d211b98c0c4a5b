// Which tile of the output a CTA computes. Every kernel is launched on the
// grid (row blocks, heads, batch × head chunks): x the block of rows the CTA
// owns (query rows for the forward and dQ, key rows for dK and dV), y the
// head those rows belong to (a query head; a key/value head for dK and dV),
// z the batch row and which of the output's column chunks (the CTAs that
// split a wide head) it writes. This is the one place that reads blockIdx,
// so that handing tiles out another way (a persistent tile loop) changes it
// alone. (The indices are divided unsigned, as blockIdx is: cheaper than
// signed division.)
#pragma once

#include "params.cuh"

namespace flashgen_device {

struct CtaTile {
  int row0;     // first row of the CTA's block
  int head;     // the head of its rows
  int kv_head;  // the key/value head that head reads (head itself for dK, dV)
  int batch;
  int chunk;    // which of the kChunks column chunks of the output
};

// A tile of kBlockRows query rows: head is a query head, reading kv_head.
template <int kBlockRows, int kChunks>
__device__ __forceinline__ CtaTile query_tile(const AttentionParams& p) {
  const int head = blockIdx.y;
  return {int(blockIdx.x * kBlockRows), head, head / p.group_size, int(blockIdx.z / kChunks),
          int(blockIdx.z % kChunks)};
}

// A tile of kBlockRows key rows of a key/value head.
template <int kBlockRows, int kChunks>
__device__ __forceinline__ CtaTile key_tile() {
  const int kv_head = blockIdx.y;
  return {int(blockIdx.x * kBlockRows), kv_head, kv_head, int(blockIdx.z / kChunks),
          int(blockIdx.z % kChunks)};
}

}  // namespace flashgen_device
