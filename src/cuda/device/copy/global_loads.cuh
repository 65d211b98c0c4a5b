// Global reads of 16-byte chunks, the primitives of the tile copies
// (copy/tile_copy.cuh): cp.async with zero fill, and rows of any alignment
// read as the aligned 16-byte chunks around them and shifted into place in
// registers, never a byte past the row's last element.
#pragma once

#include "common.cuh"

namespace flashgen_device {

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

// Copies `valid_bytes` (0 .. kBytes) from global and zero-fills the rest of kBytes.
template <int kBytes>
__device__ __forceinline__ void cp_async_zfill(void* shared, const void* global, int valid_bytes) {
  const u32 dst = shared_address(shared);
  if (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(global),
                 "r"(valid_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst), "l"(global),
                 "n"(kBytes), "r"(valid_bytes));
  }
}

__device__ __forceinline__ uint4 load_global_16(const void* address) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(address));
  return r;
}

// The 16 bytes at byte `offset` (even, 0..14) of the 32 bytes lo:hi, with
// the 16-bit elements at or past `valid` (of 8) set to zero.
__device__ __forceinline__ uint4 shift_and_mask(const uint4& lo, const uint4& hi, int offset,
                                                int valid) {
  const u32 w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  // Words offset/4 .. offset/4 + 4 with constant indices (a run-time index
  // would put w in local memory), then a 2-byte funnel shift if offset % 4.
  const int word = offset >> 2;
  u32 v[5];
#pragma unroll
  for (int i = 0; i < 5; ++i)
    v[i] = word == 0 ? w[i] : word == 1 ? w[i + 1] : word == 2 ? w[i + 2] : w[i + 3];
  u32 out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = (offset & 2) ? __byte_perm(v[i], v[i + 1], 0x5432) : v[i];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (2 * i >= valid) out[i] = 0;
    else if (2 * i + 1 >= valid) out[i] &= 0xffffu;
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// Elements [col, col + 8) of a row that is only 2-byte aligned, as one 16-byte
// vector; elements at or past `valid_cols` are zero. The aligned 16-byte
// chunks around them are read where they end inside the row; where the last
// one would reach past the row's last element (the tail of a row, which may
// be the last row of the caller's tensor), the elements are read one by one
// instead: no byte past the tensor is ever read, even one that shares an
// aligned chunk with its last element.
__device__ __forceinline__ uint4 load8_shifted(const u16* row, int col, int valid_cols) {
  const u64 address = reinterpret_cast<u64>(row + col);
  const u64 end = reinterpret_cast<u64>(row + valid_cols);
  const u64 aligned = address & ~u64(15);
  const bool two_chunks = address != aligned && aligned + 16 < end;
  if (aligned + (two_chunks ? 32 : 16) <= end) {
    const uint4 lo = load_global_16(reinterpret_cast<const void*>(aligned));
    const uint4 hi = two_chunks ? load_global_16(reinterpret_cast<const void*>(aligned + 16))
                                : make_uint4(0, 0, 0, 0);
    return shift_and_mask(lo, hi, static_cast<int>(address - aligned), valid_cols - col);
  }
  u32 out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const u32 first = col + 2 * i < valid_cols ? row[col + 2 * i] : 0u;
    const u32 second = col + 2 * i + 1 < valid_cols ? row[col + 2 * i + 1] : 0u;
    out[i] = first | (second << 16);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

}  // namespace flashgen_device
