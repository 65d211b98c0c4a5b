// What a generated user mask (Options::mask_mod) calls: the reads of its
// arrays and the integer operations that may fault, with the rules of
// common/mask_expression.hpp (int64 arithmetic wraps; an index outside its
// array or an integer division by zero is a fault). A fault makes the pair
// masked and, where the launch records them (the mask_blocks kernel), the
// first faulting pair goes to params.mask_fault for the host to report. The
// generator writes C::Mask::attends from the expression's tree with these.
#pragma once

#include "common.cuh"

namespace flashgen_device {

typedef long long mask_int;

__device__ __forceinline__ mask_int mask_add(mask_int a, mask_int b) {
  return static_cast<mask_int>(static_cast<unsigned long long>(a) +
                               static_cast<unsigned long long>(b));
}
__device__ __forceinline__ mask_int mask_subtract(mask_int a, mask_int b) {
  return static_cast<mask_int>(static_cast<unsigned long long>(a) -
                               static_cast<unsigned long long>(b));
}
__device__ __forceinline__ mask_int mask_multiply(mask_int a, mask_int b) {
  return static_cast<mask_int>(static_cast<unsigned long long>(a) *
                               static_cast<unsigned long long>(b));
}
__device__ __forceinline__ mask_int mask_negate(mask_int a) { return mask_subtract(0, a); }

__device__ __forceinline__ bool mask_division_faults(mask_int a, mask_int b) {
  return b == 0 || (b == -1 && a == static_cast<mask_int>(1ull << 63));
}
__device__ __forceinline__ mask_int mask_divide(mask_int a, mask_int b, bool& fault) {
  if (mask_division_faults(a, b)) {
    fault = true;
    return 0;
  }
  return a / b;
}
__device__ __forceinline__ mask_int mask_modulo(mask_int a, mask_int b, bool& fault) {
  if (mask_division_faults(a, b)) {
    fault = true;
    return 0;
  }
  return a % b;
}

// Element i of mask array k, as int32 (widened) or fp32; an index outside
// the array sets `fault` and reads nothing.
__device__ __forceinline__ bool mask_index_faults(const AttentionParams& p, int k, mask_int i) {
  return i < 0 || i >= p.mask_array_sizes[k];
}
template <class Stored, class Value>
__device__ __forceinline__ Value mask_element_at(const AttentionParams& p, int k, mask_int i,
                                                 bool& fault) {
  if (mask_index_faults(p, k, i)) {
    fault = true;
    return 0;
  }
  return static_cast<const Stored*>(p.mask_arrays[k])[i * p.mask_array_strides[k]];
}
__device__ __forceinline__ mask_int mask_integer_at(const AttentionParams& p, int k, mask_int i,
                                                    bool& fault) {
  return mask_element_at<int, mask_int>(p, k, i, fault);
}
__device__ __forceinline__ float mask_floating_at(const AttentionParams& p, int k, mask_int i,
                                                  bool& fault) {
  return mask_element_at<float, float>(p, k, i, fault);
}

// Whether query `query` of (batch, head) attends key `key` by the user mask:
// b = mask_batch0 + batch, and q_idx the query's position among the keys
// (query + seq_kv − seq_q), as in the reference.
template <class C>
__device__ __forceinline__ bool user_attends(const AttentionParams& p, int batch, int head,
                                             int query, int key) {
  bool fault = false;
  const mask_int q_idx = mask_int(query) + p.diagonal_offset;
  const bool attended =
      C::Mask::attends(p, mask_int(p.mask_batch0) + batch, head, q_idx, key, fault);
  if (!fault) return attended;
  if (p.mask_fault != nullptr) {  // MaskFault's order
    typedef unsigned long long u64;
    const u64 slot = u64(batch) * u64(p.mask_head_slots) + u64(head);
    const u64 rows_q = u64(p.mask_rows_q), rows_kv = u64(p.mask_rows_kv);
    const u64 order =
        (slot * (rows_q + rows_kv) + u64(q_idx + mask_int(rows_q))) * rows_kv + u64(key);
    atomicMax(&p.mask_fault->inverted_first, ~order);
  }
  return false;
}

// The generated mask's values that read the query alone (QuerySide) or the
// key alone (KeySide), computed once per query or key and shared by the
// pairs: the verdict of a pair (user_attends_sides) is then what reads both.
// The sides ignore faults: they are for the attention kernels, which
// evaluate only pairs that mask_blocks evaluated first without a fault (the
// host stops the call at one); positions past the sequences read nothing.
template <class C>
__device__ __forceinline__ typename C::Mask::QuerySide user_query_side(const AttentionParams& p,
                                                                       int batch, int head,
                                                                       int query) {
  return C::Mask::QuerySide::of(p, mask_int(p.mask_batch0) + batch, head,
                                mask_int(query) + p.diagonal_offset);
}
template <class C>
__device__ __forceinline__ typename C::Mask::KeySide user_key_side(const AttentionParams& p,
                                                                   int batch, int head, int key) {
  return C::Mask::KeySide::of(p, mask_int(p.mask_batch0) + batch, head, key);
}
template <class C>
__device__ __forceinline__ bool user_attends_sides(const AttentionParams& p, int batch, int head,
                                                   int query, int key,
                                                   const typename C::Mask::QuerySide& query_side,
                                                   const typename C::Mask::KeySide& key_side) {
  return C::Mask::attends(p, mask_int(p.mask_batch0) + batch, head,
                          mask_int(query) + p.diagonal_offset, key, query_side, key_side);
}

}  // namespace flashgen_device
