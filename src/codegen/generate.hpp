// KernelSpec + TuningParams -> a short CUDA source: a Config struct of
// constants and one extern "C" entry point that runs a template from
// src/cuda/device/. The algorithm lives in those headers, never here.
#pragma once

#include <cstddef>
#include <string>

#include "codegen/kernel_spec.hpp"

namespace flashgen {

struct GeneratedKernel {
  std::string name;    // spec.to_string() + " | " + tuning.to_string()
  std::string source;  // the translation unit NVRTC compiles
  std::string entry;   // extern "C" function name
  int threads = 0;     // per CTA
  std::size_t shared_bytes = 0;  // dynamic shared memory per CTA
  // The entry's second parameter is a TraversedTensorMaps (params.cuh) the
  // launcher encodes for the call (tuning copy=tma).
  bool tensor_maps = false;
  // Those maps' box and swizzle (TuningParams::swizzle): 0, 8-column boxes
  // without swizzle; 32, 16-column boxes swizzled by 32 bytes.
  int swizzle = 0;
};

// Throws Error(invalid_argument) when the tuning does not fit the spec (e.g.
// block rows not a multiple of 16 · warps).
GeneratedKernel generate(const KernelSpec& spec, const TuningParams& tuning);

// generate()'s rules alone, without building the source (cheap: for lookups
// that try several tunings). Throws as generate() does.
void check_tuning(const KernelSpec& spec, const TuningParams& tuning);
// Whether `tuning` meets check_tuning's rules for `spec` and its shared
// memory fits `shared_limit` bytes.
bool tuning_fits(const KernelSpec& spec, const TuningParams& tuning, std::size_t shared_limit);

// `t` with its traversed tiles copied by all threads (cp.async) instead of a
// producer warpgroup, at the kernel's default stages: the same shape where a
// producer's TMA cannot read the tensors.
TuningParams without_producer(TuningParams t);
// `t` with a producer warpgroup whose four warps copy its traversed tiles with
// cp.async, `stages` deep (0: the kernel's default; the forward needs 3 or
// more): for rows TMA cannot read (4- and 8-byte aligned). Measured on the
// H200 (docs/decisions.md): the forward four stages deep +8% / +14% at D = 68 /
// 76 over all warps copying, the key/value kernel +4% at 76, the query
// kernel even.
TuningParams with_copying_producer(TuningParams t, int stages = 0);
// `t` with a producer warpgroup copying its traversed tiles by TMA, `stages`
// deep (0: the kernel's default), into tiles of `swizzle`
// (TuningParams::swizzle; 32, whole-sector copies, measured faster on the
// H200 than 8-column slices: docs/decisions.md); where tma_copies() allows.
TuningParams with_tma_producer(TuningParams t, int stages = 0, int swizzle = 32);
// Whether a kernel of this spec may copy by TMA (generate()'s rule): every
// kind on 16-byte aligned rows (alignment class 8), the forward and the
// two-kernel backward on any contiguous rows too (token-row views:
// kernels/forward/wgmma_producer.cuh; the host reads them so for the
// key/value kernel only where each key/value head has one query head).
bool tma_copies(const KernelSpec& spec);

// Shared memory a (spec, tuning) pair needs, without generating it; the
// generated source static_asserts that the device's layout has this size.
std::size_t shared_bytes(const KernelSpec& spec, const TuningParams& tuning);

// The output columns a kernel kind splits across CTAs (tuning `head`): Dv
// for the forward, Dqk for the query backward, the wider of both for the
// key/value kernels.
int split_dim(const KernelSpec& spec);

// Number of head-dim chunks, i.e. CTAs that share one row block, each writing
// its own columns of the outputs (tuning.head_block columns at most).
int head_chunks_of(const KernelSpec& spec, const TuningParams& tuning);
// Columns of one chunk when a dim is split in `chunks` (multiple of 16); the
// device headers compute the same (chunk_width in common.cuh).
int chunk_width(int dim, int chunks);
// The wgmma kernels' tile widths of Dqk and of Dv (the forward's per CTA of
// `chunks` value chunks, the n of O = P·V); token_rows: TMA on rows that
// are not 16-byte aligned, whose tiles are wider (token_row_tile_width in
// layout/shared_memory.cuh).
int tile_width_qk(const KernelSpec& spec, bool token_rows);
int tile_width_v(const KernelSpec& spec, bool token_rows, int chunks = 1);
// On token rows: the wider of the two tiles (what a kernel holding dQ, dK
// or dV alone needs a warpgroup's registers for), and both together (dK
// and dV in one warpgroup of the key/value kernel).
int widest_token_row_tile(const KernelSpec& spec);
int token_row_tiles_together(const KernelSpec& spec);
// The tile widths of the split=dims backward kernels (multiples of 32; on
// rows that are not 16-byte aligned, those of their token-row tiles).
int split_dims_tile_qk(const KernelSpec& spec);
int split_dims_tile_v(const KernelSpec& spec);
// Whether both fit two warpgroups' registers (512 columns: half of each
// output in one warpgroup's), the split=dims kernels' bound on their tiles.
bool split_dims_tiles_fit(const KernelSpec& spec);
// K/V pipeline stages of the wgmma forward under this tuning (its `stages`, or 2).
int wgmma_forward_stages(const TuningParams& tuning);
// Stages of the backward kernels with split=dims: of K in the query kernel
// (V has two), of Q and dO in the key/value kernel.
int backward_dims_split_stages(const KernelSpec& spec, const TuningParams& tuning);

}  // namespace flashgen
