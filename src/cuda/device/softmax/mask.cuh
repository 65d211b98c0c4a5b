// Masks on a warp's score fragments: keys past the sequence end, and the
// causal mask aligned to the bottom-right corner (query i sees keys
// j <= i + causal_offset).
#pragma once

#include "common.cuh"

namespace flashgen_device {

// Key blocks of kBlockN a CTA owning query rows [row0, row0 + rows)
// traverses: all of them, or under the causal mask those up to the diagonal
// of its last row (none when that row sees no key).
template <bool kCausal, int kBlockN>
__device__ __forceinline__ int key_blocks_for_rows(const AttentionParams& p, int row0, int rows) {
  int n_blocks = ceil_div(p.seq_kv, kBlockN);
  if (kCausal) {
    const int last_key = min_of(row0 + rows - 1, p.seq_q - 1) + p.causal_offset;
    n_blocks = min_of(n_blocks, last_key < 0 ? 0 : ceil_div(last_key + 1, kBlockN));
  }
  return n_blocks;
}

// The first query block of kBlockN a CTA whose first key is key0 traverses:
// under the causal mask query i sees key j when j <= i + offset, so key0 is
// seen from query key0 - offset on.
template <bool kCausal, int kBlockN>
__device__ __forceinline__ int first_query_block(const AttentionParams& p, int key0) {
  return (kCausal ? max_of(0, key0 - p.causal_offset) : 0) / kBlockN;
}

// s: [kRowTiles][kColTiles][4] accumulator fragments (C layout of m16n8k16)
// covering rows row0 + 16·rt + {g, g+8} and columns col0 + 8·ct + 2t + {0, 1}.
template <int kRowTiles, int kColTiles, bool kCausal>
__device__ __forceinline__ void mask_scores(float (&s)[kRowTiles][kColTiles][4], int row0,
                                            int col0, int seq_kv, int causal_offset, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int ct = 0; ct < kColTiles; ++ct) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = row0 + rt * 16 + g + (i >= 2 ? 8 : 0);
        const int col = col0 + ct * 8 + 2 * t + (i & 1);
        bool masked = col >= seq_kv;
        if (kCausal) masked = masked || col > row + causal_offset;
        if (masked) s[rt][ct][i] = kMaskedScore;
      }
    }
  }
}

// The same for transposed fragments (rows are keys, columns are queries), as
// the key/value backward kernel holds Sᵀ.
template <int kRowTiles, int kColTiles, bool kCausal>
__device__ __forceinline__ void mask_scores_transposed(float (&s)[kRowTiles][kColTiles][4],
                                                       int key0, int query0, int seq_q,
                                                       int seq_kv, int causal_offset, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int ct = 0; ct < kColTiles; ++ct) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = key0 + rt * 16 + g + (i >= 2 ? 8 : 0);
        const int query = query0 + ct * 8 + 2 * t + (i & 1);
        bool masked = key >= seq_kv || query >= seq_q;
        if (kCausal) masked = masked || key > query + causal_offset;
        if (masked) s[rt][ct][i] = kMaskedScore;
      }
    }
  }
}

}  // namespace flashgen_device
