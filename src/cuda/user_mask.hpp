// A user mask (Options::mask_mod) on the GPU, the host's part: its fields of
// AttentionParams, the scratch for its ranges of attended cells, and the
// check for faults (softmax/user_mask.cuh, kernels/mask_blocks.cuh).
#pragma once

#include <cstddef>
#include <string>

#include "common/problem.hpp"
#include "cuda/device/params.cuh"
#include "cuda/runtime/runtime.hpp"

namespace flashgen::cuda {

// KernelSpec::mask_arrays of the problem's mask ("" without one).
std::string mask_arrays_of(const Problem& p);

// The mask's scratch: the fault record, then the key cells of each query
// cell, the query cells of each key cell and the bits of the wholly
// attended cells, for every slot.
std::size_t user_mask_scratch_bytes(const Problem& p);

// The mask's fields of `params`: its arrays, slots and the ranges in
// `scratch` (fault recording off: the attention kernels' setting).
void place_user_mask(const Problem& p, DevicePtr scratch, flashgen_device::AttentionParams& params);

// The mask_blocks kernel's grid: a warp per query cell, word of 32 key cells
// and slot.
LaunchShape mask_blocks_grid(const Problem& p, unsigned threads);

// Whether evaluating the mask can fault on a pair the kernels evaluate: an
// index whose range (interval arithmetic over b, h, q_idx, kv_idx, literals,
// + − * and ?:, from the problem's extents) its array does not cover, or an
// integer / or % by anything but a literal other than 0 and -1. Where it
// cannot, no fault check (and no wait for the stream) is needed: a
// boolean attn_mask's affine index into its copy, for one.
bool mask_may_fault(const Problem& p);

// Reads the fault record at the front of `scratch` (waiting for the stream)
// and, where a pair faulted, throws the fp64 reference evaluator's error
// for it, the mask's arrays copied to the host to evaluate it.
void check_mask_faults(const Problem& p, DevicePtr scratch, StreamHandle stream);

}  // namespace flashgen::cuda
