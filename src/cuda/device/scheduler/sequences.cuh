// Packed sequences (varlen, KernelSpec::varlen): the grid is the one a batch
// of `batch` sequences of seq_q query rows and seq_kv keys would have (the
// longest of each), and every CTA runs its kernel over the parameters of its
// batch entry's sequence: that sequence's lengths and diagonals, and tensors
// that start at its first row. The kernels themselves know nothing of it.
// A CTA whose block of rows lies past its sequence's end has nothing to do.
#pragma once

#include "common.cuh"
#include "params.cuh"
#include "scheduler/cta_tile.cuh"

namespace flashgen_device {

// Rows [first, end) of the packed rows, from an offsets array read at
// `batch` and `batch + 1` and clamped to [0, total], so that offsets that
// are not non-decreasing never point outside the tensors.
struct PackedRows {
  int first, end;
};
__device__ __forceinline__ PackedRows packed_rows(const int* begin, index_t stride, int batch,
                                                  int total) {
  const int first = min_of(max_of(begin[batch * stride], 0), total);
  const int end = min_of(max_of(begin[(batch + 1) * stride], first), total);
  return {first, end};
}

template <class T>
__device__ __forceinline__ void advance_rows(TensorArg& t, int rows) {
  t.data = static_cast<T*>(t.data) + rows * t.stride_seq;
}

// The parameters as sequence `batch` sees them; kElementBytes the size of
// the tensors' elements (2, or 4 for the fp32 kernels). A sequence longer
// than the grid's rows (a max_seqlen below its length) is cut to them, as
// the grid has no CTA for the rest.
template <int kElementBytes>
__device__ __forceinline__ AttentionParams packed_sequence_params(const AttentionParams& p,
                                                                  int batch) {
  typedef typename select_type<kElementBytes == 4, float, u16>::type T;
  const PackedRows q = packed_rows(p.q_begin, p.q_begin_stride, batch, p.total_q);
  const PackedRows k = packed_rows(p.k_begin, p.k_begin_stride, batch, p.total_kv);
  AttentionParams s = p;
  s.seq_q = min_of(q.end - q.first, p.seq_q);
  s.seq_kv = min_of(k.end - k.first, p.seq_kv);
  advance_rows<T>(s.q, q.first);
  advance_rows<T>(s.o, q.first);
  advance_rows<T>(s.grad_o, q.first);
  advance_rows<T>(s.grad_q, q.first);
  advance_rows<T>(s.k, k.first);
  advance_rows<T>(s.v, k.first);
  advance_rows<T>(s.grad_k, k.first);
  advance_rows<T>(s.grad_v, k.first);
  if (s.lse.data != nullptr) s.lse.data += q.first * s.lse.stride_seq;
  s.sequence_q_row0 = q.first;
  s.sequence_kv_row0 = k.first;
  const int diagonal = s.seq_kv - s.seq_q;
  s.diagonal_offset = diagonal;
  s.causal_offset = min_of(p.sequence_past_fixed, diagonal + p.sequence_past_relative);
  s.window_offset = diagonal + p.sequence_before_relative;
  return s;
}

// Runs Kernel over this CTA's sequence where its block of kBlockRows rows
// (keys where kOverKeys, else queries) starts inside it. The grid's cell is
// found as the kernel finds it (tile_cell), its z axis being batch ×
// kChunks.
template <class Kernel, int kElementBytes, bool kCausal, bool kOverKeys, int kBlockRows,
          int kChunks, class... Maps>
__device__ __forceinline__ void run_sequence(const AttentionParams& p, unsigned char* shared,
                                             const Maps&... maps) {
  const uint3 cell = tile_cell<kCausal, !kOverKeys>();
  const AttentionParams s = packed_sequence_params<kElementBytes>(p, int(cell.z / kChunks));
  if (int(cell.x) * kBlockRows >= (kOverKeys ? s.seq_kv : s.seq_q)) return;
  Kernel::run(s, maps..., shared);
}

}  // namespace flashgen_device
