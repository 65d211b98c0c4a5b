// The rules a tuning must meet for its spec (generate() and check_tuning()),
// and the tuning-derived quantities the generator and the launcher share.
#include <functional>
#include <string>

#include "codegen/generate.hpp"
#include "codegen/kernel_families.hpp"
#include "codegen/forward_schedule.hpp"
#include "cuda/device/layout/shared_memory.cuh"

namespace flashgen {
namespace {

int round_up(int a, int b) { return (a + b - 1) / b * b; }

// The fp32 kernels (kernels/f32/simt.cuh): 8 rows per warp, 32 traversed
// rows, output columns in chunks of 32 per CTA.
constexpr int kF32RowsPerWarp = 8;
constexpr int kF32MostAccumulatedColumns = 256;
int f32_chunk(int dim, int chunks) { return flashgen_device::f32_chunk_width(dim, chunks); }

}  // namespace

// The fp32 kernels' rules: 8 rows per warp, 32 traversed rows (a lane
// each), output chunks of 32 columns whose accumulators stay in registers.
static void check_f32_tuning(const KernelSpec& spec, const TuningParams& t,
                             const std::function<void(const std::string&)>& fail) {
  f32_info_of(spec.kind);  // throws for the kinds fp32 does not run
  if (t.warps < 1 || t.warps > 16) fail("warps must be 1..16");
  if (t.block_rows != kF32RowsPerWarp * t.warps) fail("dtype f32 needs rows = 8 * warps");
  if (t.block_cols != flashgen_device::kF32TraversedRows) fail("dtype f32 needs cols = 32");
  if (t.head_block < 0 || t.head_block % 32 != 0) fail("dtype f32 needs head 0 or a multiple of 32");
  if (t.cached != 0 || t.wgmma || t.stages != 0 || t.producer)
    fail("dtype f32 takes no cache, mma, stages or producer fields");
  const int chunks = head_chunks_of(spec, t);
  const int widest = spec.kind == KernelKind::forward ? f32_chunk(spec.dim_v, chunks)
                     : spec.kind == KernelKind::backward_query
                         ? f32_chunk(spec.dim_qk, chunks)
                         : f32_chunk(spec.dim_qk, chunks) + f32_chunk(spec.dim_v, chunks);
  if (widest > kF32MostAccumulatedColumns)
    fail("dtype f32 accumulates at most 256 output columns per CTA (dK and dV together): "
         "set head");
}

// The wide-head key/value backward whose two warpgroups share 64 keys and
// split dK and dV between them (split=outputs).
static void check_outputs_split_tuning(const KernelSpec& spec, const TuningParams& t,
                                       const std::function<void(const std::string&)>& fail) {
  if (!(t.wgmma && spec.kind == KernelKind::backward_key_value))
    fail("split=outputs applies to the wgmma backward_key_value kernel only");
  if (spec.arch != "sm_90a") fail("mma=wgmma needs sm_90a");
  if (t.warps != 8 || t.block_rows != 64 || t.head_block != 0)
    fail("split=outputs needs rows=64 warps=8 head=0 (two warpgroups over the same 64 keys)");
  if (t.block_cols < 16 || t.block_cols % 16 != 0 || t.block_cols > 256)
    fail("cols must be a multiple of 16 up to 256");
  if (t.cached != 0 || t.stages != 0) fail("split=outputs takes no cache or stages (two stages)");
  if (round_up(spec.dim_qk, 16) > 256 || round_up(spec.dim_v, 16) > 256)
    fail("split=outputs needs Dqk <= 256 and Dv <= 256 (dK or dV in one warpgroup's registers)");
  if (!(t.producer && t.tma))
    fail("split=outputs needs producer=warp copy=tma (Q and dO copied by TMA)");
  if (spec.vec < 1) fail("split=outputs needs contiguous rows (alignment class 1, 2, 4 or 8)");
  if (spec.vec < 8 && widest_token_row_tile(spec) > 256)
    fail("copy=tma on rows that are not 16-byte aligned widens dK's or dV's tile past 256 "
         "columns (one warpgroup's registers)");
}

// The wide-head backward kernels whose two warpgroups share 64 rows and
// split the head dims (split=dims): the query kernel (K three stages deep
// by default), and the key/value kernel, whose CTAs each accumulate dV or
// dK (Q and dO two stages deep by default).
static void check_backward_dims_split_tuning(const KernelSpec& spec, const TuningParams& t,
                                             const std::function<void(const std::string&)>& fail) {
  const std::string name = std::string("split=dims for ") + to_string(spec.kind);
  if (!t.wgmma) fail("split=dims applies to the wgmma kernels only");
  if (spec.arch != "sm_90a") fail("mma=wgmma needs sm_90a");
  if (t.warps != 8 || t.block_rows != 64 || t.head_block != 0)
    fail(name + " needs rows=64 warps=8 head=0 (two warpgroups over the same 64 rows)");
  if (t.block_cols < 16 || t.block_cols % 16 != 0 || t.block_cols > 256)
    fail("cols must be a multiple of 16 up to 256");
  // The key/value kernel's dV CTA may hold K, its dK CTA V, in registers;
  // the query kernel's warpgroups Q and dO.
  const bool key_value = spec.kind == KernelKind::backward_key_value;
  const unsigned cacheable = key_value ? kCacheK | kCacheV : kCacheQ | kCacheGradO;
  if ((t.cached & ~cacheable) != 0)
    fail(key_value ? name + " caches K, V or both (cache=K, cache=V, cache=K,V or cache=none)"
                   : name + " caches Q, dO or both (cache=Q, cache=dO, cache=Q,dO or cache=none)");
  if (round_up(spec.dim_qk, 32) / 2 > 256 || round_up(spec.dim_v, 32) / 2 > 256)
    fail(name + " needs Dqk <= 512 and Dv <= 512 (half of each output in a warpgroup's registers)");
  if (!(t.producer && t.tma))
    fail(name + " needs producer=warp copy=tma (the traversed tiles copied by TMA)");
  if (spec.vec < 1) fail(name + " needs contiguous rows (alignment class 1, 2, 4 or 8)");
  if (!split_dims_tiles_fit(spec))
    fail("copy=tma on rows that are not 16-byte aligned widens the tiles past 512 columns "
         "(half of each output in a warpgroup's registers)");
  if (t.stages != 0 && (t.stages < 2 || t.stages > 4)) fail(name + " needs stages=2, 3 or 4");
}

// The mma.sync forward whose warps split the keys of one 16-row tile.
static void check_keys_split_tuning(const KernelSpec& spec, const TuningParams& t,
                                    const std::function<void(const std::string&)>& fail) {
  if (spec.kind != KernelKind::forward || t.wgmma || t.producer)
    fail("split=keys applies to the mma.sync forward only");
  if (t.block_rows != 16) fail("split=keys needs rows=16 (one row tile its warps share)");
  if (t.warps < 2) fail("split=keys needs warps >= 2");
  if (t.block_cols % (16 * t.warps) != 0)
    fail("split=keys needs cols a multiple of 16 * warps (16 keys or more a warp)");
}

// The kernels whose warpgroups do not each own their own rows.
static void check_split_tuning(const KernelSpec& spec, const TuningParams& t,
                               const std::function<void(const std::string&)>& fail) {
  if (t.split == WarpgroupSplit::keys) return check_keys_split_tuning(spec, t, fail);
  if (t.split == WarpgroupSplit::outputs) return check_outputs_split_tuning(spec, t, fail);
  if (spec.kind != KernelKind::backward_query && spec.kind != KernelKind::backward_key_value)
    fail("split=dims applies to the wgmma backward_query and backward_key_value only");
  check_backward_dims_split_tuning(spec, t, fail);
}

void check_tuning(const KernelSpec& spec, const TuningParams& t) {
  auto fail = [&](const std::string& rule) {
    throw Error(ErrorCode::invalid_argument,
                "tuning '" + t.to_string() + "' for '" + spec.to_string() + "': " + rule);
  };
  if (is_row_kernel(spec.kind)) return;
  if (spec.dim_qk < 1 || spec.dim_v < 1) fail("dims must be >= 1");
  if (spec.split_keys &&
      (spec.kind != KernelKind::forward || spec.dtype == DType::f32 || t.wgmma || t.producer ||
       (t.split != WarpgroupSplit::rows && t.split != WarpgroupSplit::keys)))
    fail("split_keys is a forward of the mma.sync kernel (f16, bf16; no mma=wgmma, producer or "
         "split but split=keys)");
  if (t.split == WarpgroupSplit::keys && spec.dtype == DType::f32)
    fail("split=keys applies to the mma.sync forward only (16-bit tensors)");
  if (spec.cache != KeyCache::none && !spec.split_keys)
    fail("a KV cache (kv_cache=" + std::string(to_string(spec.cache)) +
         ") is read by the split-key forward");
  if (spec.varlen &&
      (spec.split_keys || spec.cache != KeyCache::none || t.persistent ||
       (t.tma && spec.kind != KernelKind::forward) ||
       (spec.kind != KernelKind::forward && spec.kind != KernelKind::backward_query &&
        spec.kind != KernelKind::backward_key_value)))
    fail("varlen (packed sequences) applies to the forward (copy=tma allowed), backward_query "
         "and backward_key_value (copied without TMA), one tile per CTA, no split keys or KV "
         "cache");
  if (t.persistent)
    if (const std::string refused = walk_refused(spec, t); !refused.empty()) fail(refused);
  if (t.pingpong)
    if (const std::string refused = turns_refused(spec, t); !refused.empty()) fail(refused);
  if (spec.dtype == DType::f32) return check_f32_tuning(spec, t, fail);
  if (t.swizzle != 0 && t.swizzle != 32) fail("swizzle must be 0 or 32");
  if (t.swizzle != 0 && !t.tma) fail("swizzle=32 applies to the wgmma kernels with copy=tma");
  if (t.split != WarpgroupSplit::rows) return check_split_tuning(spec, t, fail);
  // Of these kernels only the mma.sync forward holds an operand (Q) in
  // registers; the others would ignore the field.
  const unsigned holdable = spec.kind == KernelKind::forward && !t.wgmma ? kCacheQ : 0u;
  if ((t.cached & ~holdable) != 0)
    fail(holdable ? "the mma.sync forward caches only Q (cache=Q or cache=none)"
                  : "this kernel caches no operand (cache=none; the mma.sync forward holds Q, "
                    "the backward kernels with split=dims K and V or Q and dO)");
  if (t.warps < 1 || t.warps > 16) fail("warps must be 1..16");
  if (t.block_rows < 16 * t.warps || t.block_rows % (16 * t.warps) != 0)
    fail("rows must be a positive multiple of 16 * warps");
  if (t.block_cols < 16 || t.block_cols % 16 != 0) fail("cols must be a positive multiple of 16");
  if (t.head_block < 0 || t.head_block % 16 != 0) fail("head must be 0 or a multiple of 16");
  if (t.wgmma) {
    // The accumulators a wgmma kernel keeps in registers bound its dims.
    constexpr int kMostValueColumns = flashgen_device::kForwardMostValueColumns;
    const int dqk16 = round_up(spec.dim_qk, 16), dv16 = round_up(spec.dim_v, 16);
    switch (spec.kind) {
      case KernelKind::forward:
        if (chunk_width(spec.dim_v, head_chunks_of(spec, t)) > kMostValueColumns)
          fail("mma=wgmma for the forward needs at most " + std::to_string(kMostValueColumns) +
               " value columns per CTA (O in registers): head <= 256");
        if (t.tma && spec.vec < 8 &&
            tile_width_v(spec, true, head_chunks_of(spec, t)) > kMostValueColumns)
          fail("copy=tma on rows that are not 16-byte aligned widens the value tile past " +
               std::to_string(kMostValueColumns) + " columns (O in registers): a smaller head");
        break;
      case KernelKind::backward_query:
        if (dqk16 > 256) fail("mma=wgmma for backward_query needs Dqk <= 256 (dQ in registers)");
        if (t.tma && spec.vec < 8 && tile_width_qk(spec, true) > 256)
          fail("copy=tma on rows that are not 16-byte aligned widens dQ's tile past 256 columns "
               "(dQ in registers)");
        break;
      case KernelKind::backward_key_value:
        if (dqk16 + dv16 > 256)
          fail("mma=wgmma for backward_key_value needs Dqk + Dv <= 256 (dK and dV in registers)");
        break;
      default: fail("mma=wgmma is a forward, backward_query or backward_key_value kernel");
    }
    if (spec.arch != "sm_90a") fail("mma=wgmma needs sm_90a");
    // Rows that are only 2-byte aligned are staged and shifted into the tiles.
    if (spec.vec < 1) fail("mma=wgmma needs contiguous rows (alignment class 1, 2, 4 or 8)");
    if (t.warps % 4 != 0) fail("mma=wgmma needs whole warpgroups (warps a multiple of 4)");
    if (t.block_rows != 16 * t.warps) fail("mma=wgmma needs rows = 16 * warps");
    if (t.block_cols > 256) fail("mma=wgmma needs cols <= 256");
    if (spec.kind != KernelKind::forward && head_chunks_of(spec, t) != 1)
      fail("mma=wgmma splits no output dims in the backward (head must be 0)");
  }
  if (t.stages != 0) {
    if (spec.kind != KernelKind::forward || spec.dtype == DType::f32)
      fail("stages applies to the forward of 16-bit tensors only (leave it out elsewhere)");
    if (t.stages < 2 || t.stages > 4) fail("stages must be 2, 3 or 4");
    // Rows only 2-byte aligned go through one staging area (no TMA): two stages.
    if (t.wgmma && spec.vec == 1 && !t.tma && t.stages != 2)
      fail("stages must be 2 on rows only 2-byte aligned (unless copy=tma)");
  }
  if (t.producer) {
    const bool has_producer = spec.kind == KernelKind::forward ||
                              spec.kind == KernelKind::backward_query ||
                              spec.kind == KernelKind::backward_key_value;
    if (!(t.wgmma && has_producer))
      fail("producer=warp applies to the wgmma kernels only (forward, backward_query, "
           "backward_key_value)");
    // RegisterSplit (pipeline/producer_pipeline.cuh) gives one computing
    // warpgroup beside the producer fewer registers than its launch holds
    // (240 < 248): its static_assert would fail the compile.
    if (t.warps < 8)
      fail("producer=warp needs two or more computing warpgroups (warps >= 8)");
    if (spec.vec < 2 && !t.tma)
      fail("producer=warp needs rows aligned to 4 bytes or more (alignment class 2, 4 or 8), "
           "or copy=tma");
    if (spec.kind == KernelKind::forward && !t.tma && wgmma_forward_stages(t) < 3)
      fail("producer=warp with cp.async copies needs stages >= 3 (copy=tma: 2 will do)");
  }
  if (t.tma) {
    if (!t.producer) fail("copy=tma applies to the wgmma kernels with producer=warp only");
    if (!tma_copies(spec))
      fail(spec.kind == KernelKind::backward_atomic
               ? "copy=tma needs rows, strides and pointers aligned to 16 bytes (alignment class "
                 "8) in this kernel"
               : "copy=tma needs contiguous rows (alignment class 1, 2, 4 or 8)");
  }
}

bool tuning_fits(const KernelSpec& spec, const TuningParams& tuning, std::size_t shared_limit) {
  try {
    if (shared_bytes(spec, tuning) > shared_limit) return false;
    check_tuning(spec, tuning);  // throws when the tuning breaks a rule for these dims
    return true;
  } catch (const Error&) {
    return false;
  }
}

int split_dim(const KernelSpec& spec) {
  switch (spec.kind) {
    case KernelKind::forward: return spec.dim_v;
    case KernelKind::backward_query: return spec.dim_qk;
    default: return spec.dim_qk > spec.dim_v ? spec.dim_qk : spec.dim_v;
  }
}

int head_chunks_of(const KernelSpec& spec, const TuningParams& t) {
  // The key/value kernel with split=dims: a dV and a dK CTA per key block.
  if (spec.kind == KernelKind::backward_key_value && t.split == WarpgroupSplit::dims) return 2;
  const int width = round_up(split_dim(spec), 16);
  if (t.head_block <= 0 || t.head_block >= width) return 1;
  return (width + t.head_block - 1) / t.head_block;
}

TuningParams without_producer(TuningParams t) {
  t.producer = false;
  t.tma = false;
  t.stages = 0;
  t.swizzle = 0;
  t.persistent = false;
  t.pingpong = false;
  return t;
}

TuningParams with_copying_producer(TuningParams t, int stages) {
  t.producer = true;
  t.tma = false;
  t.stages = stages;
  t.swizzle = 0;
  t.persistent = false;
  return t;
}

TuningParams with_tma_producer(TuningParams t, int stages, int swizzle) {
  t.producer = true;
  t.tma = true;
  t.stages = stages;
  t.swizzle = swizzle;
  return t;
}

int wgmma_forward_stages(const TuningParams& t) {
  if (t.stages != 0) return t.stages;
  return t.producer ? 3 : 2;
}

int backward_dims_split_stages(const KernelSpec& spec, const TuningParams& t) {
  if (t.stages != 0) return t.stages;
  return spec.kind == KernelKind::backward_query ? 3 : 2;
}

int chunk_width(int dim, int chunks) { return flashgen_device::layout_chunk_width(dim, chunks); }

bool tma_copies(const KernelSpec& spec) {
  const bool token_rows = spec.kind == KernelKind::forward ||
                          spec.kind == KernelKind::backward_query ||
                          spec.kind == KernelKind::backward_key_value;
  return spec.vec == 8 || (token_rows && spec.vec >= 1);
}

int tile_width_qk(const KernelSpec& spec, bool token_rows) {
  return flashgen_device::head_tile_width(spec.dim_qk, spec.vec, token_rows);
}

int tile_width_v(const KernelSpec& spec, bool token_rows, int chunks) {
  return flashgen_device::forward_value_tile_width(spec.dim_v, chunks, spec.vec, token_rows);
}

int split_dims_tile_qk(const KernelSpec& spec) {
  return flashgen_device::split_dims_tile_width(spec.dim_qk, spec.vec, spec.vec < 8);
}

int split_dims_tile_v(const KernelSpec& spec) {
  return flashgen_device::split_dims_tile_width(spec.dim_v, spec.vec, spec.vec < 8);
}

bool split_dims_tiles_fit(const KernelSpec& spec) {
  constexpr int kMostColumns = 512;
  return split_dims_tile_qk(spec) <= kMostColumns && split_dims_tile_v(spec) <= kMostColumns;
}

int widest_token_row_tile(const KernelSpec& spec) {
  const int qk = tile_width_qk(spec, true), v = tile_width_v(spec, true);
  return qk > v ? qk : v;
}

int token_row_tiles_together(const KernelSpec& spec) {
  return tile_width_qk(spec, true) + tile_width_v(spec, true);
}

}  // namespace flashgen
