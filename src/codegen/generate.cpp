#include "codegen/generate.hpp"

#include <cstdint>
#include <functional>
#include <sstream>

#include "cuda/device/params.cuh"

namespace flashgen {
namespace {

int round_up(int a, int b) { return (a + b - 1) / b * b; }

// Elements of padding per shared row: 16 bytes, so the eight rows one
// ldmatrix reads start in distinct bank groups (matches the device headers).
constexpr int kRowPad = 8;
constexpr std::size_t kElementBytes = 2;
// Threads of the row kernels: 8 warps, one query row each (kRowKernelWarps
// in row_kernels.cuh).
constexpr int kRowKernelThreads = 256;
// The fp32 kernels (simt_f32.cuh): 8 rows per warp, 32 traversed rows,
// output columns in chunks of 32 per CTA.
constexpr int kF32RowsPerWarp = 8;
constexpr int kF32TraversedRows = 32;
constexpr int kF32MostAccumulatedColumns = 256;
int f32_chunk(int dim, int chunks) { return round_up((dim + chunks - 1) / chunks, 32); }

struct KindInfo {
  const char* header;    // device header with the template
  const char* kernel;    // template name
  const char* entry;     // extern "C" name
};

// fp32 tensors: the CUDA-core kernels of the deterministic backward and
// the forward (simt_f32.cuh).
KindInfo f32_info_of(KernelKind kind) {
  switch (kind) {
    case KernelKind::forward: return {"forward_f32.cuh", "ForwardF32", "flashgen_forward"};
    case KernelKind::backward_query:
      return {"backward_query_f32.cuh", "BackwardQueryF32", "flashgen_backward_query"};
    case KernelKind::backward_key_value:
      return {"backward_key_value_f32.cuh", "BackwardKeyValueF32", "flashgen_backward_key_value"};
    default: break;
  }
  throw Error(ErrorCode::invalid_argument,
              std::string("dtype f32 runs the forward and the deterministic backward "
                          "(backward_query, backward_key_value); no ") +
                  to_string(kind) + " kernel");
}

KindInfo info_of(const KernelSpec& spec, const TuningParams& t) {
  if (spec.dtype == DType::f32) return f32_info_of(spec.kind);
  switch (spec.kind) {
    case KernelKind::forward:
      if (t.producer)
        return {"forward_wgmma_producer.cuh", "ForwardWgmmaProducer", "flashgen_forward"};
      if (t.wgmma) return {"forward_wgmma.cuh", "ForwardWgmma", "flashgen_forward"};
      return {"forward.cuh", "Forward", "flashgen_forward"};
    case KernelKind::backward_query:
      if (t.split == WarpgroupSplit::dims)
        return {"backward_query_wgmma_split.cuh", "BackwardQueryWgmmaSplit",
                "flashgen_backward_query"};
      if (t.producer)
        return {"backward_query_wgmma_producer.cuh", "BackwardQueryWgmmaProducer",
                "flashgen_backward_query"};
      if (t.wgmma) return {"backward_query_wgmma.cuh", "BackwardQueryWgmma", "flashgen_backward_query"};
      return {"backward_query.cuh", "BackwardQuery", "flashgen_backward_query"};
    case KernelKind::backward_key_value:
      if (t.split == WarpgroupSplit::dims)
        return {"backward_key_value_wgmma_dims.cuh", "BackwardKeyValueWgmmaDims",
                "flashgen_backward_key_value"};
      if (t.split == WarpgroupSplit::outputs)
        return {"backward_key_value_wgmma_split.cuh", "BackwardKeyValueWgmmaSplit",
                "flashgen_backward_key_value"};
      if (t.producer)
        return {"backward_key_value_wgmma_producer.cuh", "BackwardKeyValueWgmmaProducer",
                "flashgen_backward_key_value"};
      if (t.wgmma)
        return {"backward_key_value_wgmma.cuh", "BackwardKeyValueWgmma",
                "flashgen_backward_key_value"};
      return {"backward_key_value.cuh", "BackwardKeyValue", "flashgen_backward_key_value"};
    case KernelKind::backward_atomic:
      return {"backward_key_value.cuh", "BackwardAtomic", "flashgen_backward_atomic"};
    case KernelKind::backward_prepare:
      return {"row_kernels.cuh", "BackwardPrepare", "flashgen_backward_prepare"};
    case KernelKind::convert_grad_q:
      return {"row_kernels.cuh", "ConvertGradQ", "flashgen_convert_grad_q"};
  }
  throw Error(ErrorCode::invalid_argument, "unknown kernel kind");
}

const char* element_constant(DType dtype) {
  switch (dtype) {
    case DType::f16: return "fg::kF16";
    case DType::bf16: return "fg::kBF16";
    case DType::f32: return "fg::kF32";
  }
  return "fg::kBF16";
}

// Row-parallel helper kernels take no tuning (one warp per query row).
bool is_row_kernel(KernelKind kind) {
  return kind == KernelKind::backward_prepare || kind == KernelKind::convert_grad_q;
}

}  // namespace

// The fp32 kernels' rules: 8 rows per warp, 32 traversed rows (a lane
// each), output chunks of 32 columns whose accumulators stay in registers.
static void check_f32_tuning(const KernelSpec& spec, const TuningParams& t,
                             const std::function<void(const std::string&)>& fail) {
  f32_info_of(spec.kind);  // throws for the kinds fp32 does not run
  if (t.warps < 1 || t.warps > 16) fail("warps must be 1..16");
  if (t.block_rows != kF32RowsPerWarp * t.warps) fail("dtype f32 needs rows = 8 * warps");
  if (t.block_cols != kF32TraversedRows) fail("dtype f32 needs cols = 32");
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
  if (spec.vec != 8)
    fail("split=outputs needs rows, strides and pointers aligned to 16 bytes (alignment class 8)");
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
  if (spec.vec != 8)
    fail(name + " needs rows, strides and pointers aligned to 16 bytes (alignment class 8)");
  if (t.stages != 0 && (t.stages < 2 || t.stages > 4)) fail(name + " needs stages=2, 3 or 4");
}

// The kernels whose warpgroups do not each own their own rows.
static void check_split_tuning(const KernelSpec& spec, const TuningParams& t,
                               const std::function<void(const std::string&)>& fail) {
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
    const int dqk16 = round_up(spec.dim_qk, 16), dv16 = round_up(spec.dim_v, 16);
    switch (spec.kind) {
      case KernelKind::forward:
        if (chunk_width(spec.dim_v, head_chunks_of(spec, t)) > 256)
          fail("mma=wgmma for the forward needs at most 256 value columns per CTA (O in "
               "registers): head <= 256");
        break;
      case KernelKind::backward_query:
        if (dqk16 > 256) fail("mma=wgmma for backward_query needs Dqk <= 256 (dQ in registers)");
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
    if (!(t.wgmma && spec.kind == KernelKind::forward))
      fail("stages applies to the wgmma forward only (leave it out elsewhere)");
    if (t.stages < 2 || t.stages > 4) fail("stages must be 2, 3 or 4");
    // Rows only 2-byte aligned go through one staging area: two stages.
    if (spec.vec == 1 && t.stages != 2) fail("stages must be 2 on rows only 2-byte aligned");
  }
  if (t.producer) {
    const bool has_producer = spec.kind == KernelKind::forward ||
                              spec.kind == KernelKind::backward_query ||
                              spec.kind == KernelKind::backward_key_value;
    if (!(t.wgmma && has_producer))
      fail("producer=warp applies to the wgmma kernels only (forward, backward_query, "
           "backward_key_value)");
    if (spec.vec < 2)
      fail("producer=warp needs rows aligned to 4 bytes or more (alignment class 2, 4 or 8)");
    if (spec.kind == KernelKind::forward && !t.tma && wgmma_forward_stages(t) < 3)
      fail("producer=warp with cp.async copies needs stages >= 3 (copy=tma: 2 will do)");
  }
  if (t.tma) {
    if (!t.producer) fail("copy=tma applies to the wgmma kernels with producer=warp only");
    if (spec.vec != 8)
      fail("copy=tma needs rows, strides and pointers aligned to 16 bytes (alignment class 8)");
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
  return t;
}

TuningParams with_copying_producer(TuningParams t, int stages) {
  t.producer = true;
  t.tma = false;
  t.stages = stages;
  t.swizzle = 0;
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

// A producer warp's pipeline: a full and an empty barrier per stage.
static std::size_t producer_barrier_bytes(const TuningParams& t, std::size_t stages) {
  return t.producer ? 2 * stages * sizeof(std::uint64_t) : 0;
}

// The wgmma backward kernels traverse three stages (the query kernel's V two
// without a producer warp).
constexpr std::size_t kWgmmaBackwardStages = 3;

int chunk_width(int dim, int chunks) { return round_up((round_up(dim, 16) + chunks - 1) / chunks, 16); }

// Elements of the staging area of a [rows][cols] tile copied as the aligned
// 16-byte chunks around its rows (alignment classes 1, 2, 4; TileCopy in copy.cuh).
static std::size_t stage_elements(const KernelSpec& spec, std::size_t rows, std::size_t cols) {
  const bool staged = spec.vec >= 1 && spec.vec < 8;
  return staged ? rows * (cols / 8 + 1) * 8 : 0;
}

// Must match the SharedStorage of forward_f32.cuh, backward_query_f32.cuh
// and backward_key_value_f32.cuh (the generated source static_asserts it).
static std::size_t f32_shared_bytes(const KernelSpec& spec, const TuningParams& t) {
  const int chunks = head_chunks_of(spec, t);
  const std::size_t rows = t.block_rows, traversed = kF32TraversedRows;
  // The warps' own rows are read 16 bytes at a time: widths rounded up to 4.
  const std::size_t dqk = round_up(spec.dim_qk, 4), dv = round_up(spec.dim_v, 4);
  auto odd = [](std::size_t cols) { return cols % 2 == 1 ? cols : cols + 1; };
  switch (spec.kind) {
    case KernelKind::forward:  // q [rows][dqk], k [32][odd dqk], v [32][chunk]
      return sizeof(float) * (rows * dqk + traversed * odd(dqk) +
                              traversed * f32_chunk(spec.dim_v, chunks));
    case KernelKind::backward_query:  // q, dO [rows][..], k [32][odd chunks], v [32][odd dv], 2 x rows
      return sizeof(float) *
             (rows * (dqk + dv) + traversed * odd(f32_chunk(spec.dim_qk, chunks) * chunks) +
              traversed * odd(dv) + 2 * rows);
    case KernelKind::backward_key_value:  // k, v [rows][..], q, dO [32][odd chunks], 2 x 32
      return sizeof(float) *
             (rows * (dqk + dv) + traversed * odd(f32_chunk(spec.dim_qk, chunks) * chunks) +
              traversed * odd(f32_chunk(spec.dim_v, chunks) * chunks) + 2 * traversed);
    default: return 0;
  }
}

std::size_t shared_bytes(const KernelSpec& spec, const TuningParams& t) {
  if (spec.dtype == DType::f32) return f32_shared_bytes(spec, t);
  const std::size_t n = head_chunks_of(spec, t);
  const std::size_t rows = t.block_rows, cols = t.block_cols;
  const std::size_t dqk16 = round_up(spec.dim_qk, 16), dv16 = round_up(spec.dim_v, 16);
  switch (spec.kind) {
    case KernelKind::forward: {
      // wgmma: q [rows][dqk], `stages` stages of k [cols][dqk] and v [cols][dv chunk], no padding;
      // with a producer warp, a full and an empty barrier per stage of two pipelines (K, V)
      // (alignment class 1: plus the staging of k and v, as for mma.sync)
      if (t.wgmma) {
        const std::size_t dv_chunk = chunk_width(spec.dim_v, int(n));
        const std::size_t staging =
            spec.vec == 1 ? stage_elements(spec, cols, dqk16) + stage_elements(spec, cols, dv_chunk)
                          : 0;
        const std::size_t stages = wgmma_forward_stages(t);
        return kElementBytes * (rows * dqk16 + stages * cols * (dqk16 + dv_chunk) + staging) +
               2 * producer_barrier_bytes(t, stages);
      }
      // q [rows][dqk], k [cols][dqk], v [cols][dv chunk]; staged: k, v
      const std::size_t dqk = dqk16, dv = chunk_width(spec.dim_v, n);
      return kElementBytes * (rows * (dqk + kRowPad) + cols * (dqk + kRowPad) +
                              cols * (dv + kRowPad) + stage_elements(spec, cols, dqk) +
                              stage_elements(spec, cols, dv));
    }
    case KernelKind::backward_query: {
      // split=dims: q [64][dqk], dO [64][dv] (dims rounded up to 32; one held
      // in registers: a placeholder of 1024 bytes); `stages` stages of k
      // [cols][dqk], two of v [cols][dv]; lse and dterm [64]; the exchanges
      // [2 warpgroups][128 threads] of partial S and dP (cols / 2 floats) and
      // of dS (cols / 8 words); a full and an empty barrier per stage of each
      // pipeline
      if (t.split == WarpgroupSplit::dims) {
        const std::size_t dqk32 = round_up(spec.dim_qk, 32), dv32 = round_up(spec.dim_v, 32);
        const std::size_t key_stages = backward_dims_split_stages(spec, t);
        const std::size_t q_tile =
            flashgen_device::held_tile_elements(t.cached & kCacheQ, int(rows * dqk32));
        const std::size_t grad_o_tile =
            flashgen_device::held_tile_elements(t.cached & kCacheGradO, int(rows * dv32));
        return kElementBytes *
                   (q_tile + grad_o_tile + key_stages * cols * dqk32 + 2 * cols * dv32) +
               sizeof(float) * 2 * rows + 2 * 128 * 4 * (cols / 2 + cols / 8) +
               producer_barrier_bytes(t, key_stages) + producer_barrier_bytes(t, 2);
      }
      // wgmma: q [rows][dqk], dO [rows][dv], lse and dterm [rows]; three stages
      // of k [cols][dqk], two of v [cols][dv]; no padding (alignment class 1:
      // plus the staging of k and v)
      if (t.wgmma) {
        const std::size_t staging =
            spec.vec == 1 ? stage_elements(spec, cols, dqk16) + stage_elements(spec, cols, dv16) : 0;
        // A producer warp keeps V as many stages deep as K.
        const std::size_t stages = kWgmmaBackwardStages, value_stages = t.producer ? stages : 2;
        return kElementBytes * (rows * (dqk16 + dv16) + stages * cols * dqk16 +
                                value_stages * cols * dv16 + staging) +
               sizeof(float) * 2 * rows + producer_barrier_bytes(t, stages);
      }
      // q [rows][dqk], dO [rows][dv], k [cols][dqk], v [cols][dv]; lse, dterm [rows];
      // staged: k, v
      const std::size_t dqk = n * chunk_width(spec.dim_qk, n), dv = dv16;
      return kElementBytes * ((rows + cols) * (dqk + kRowPad) + (rows + cols) * (dv + kRowPad) +
                              stage_elements(spec, cols, dqk) + stage_elements(spec, cols, dv)) +
             sizeof(float) * 2 * rows;
    }
    case KernelKind::backward_key_value:
      // split=dims: k [64][dqk], v [64][dv] (dims rounded up to 32; V held
      // in registers: a placeholder of 1024 bytes); `stages` stages of q
      // [cols][dqk], dO [cols][dv], lse and dterm [cols]; the exchanges [2
      // warpgroups][128 threads] of partial Sᵀ and dPᵀ (cols / 2 floats) and
      // of A fragments (cols / 8 words); a full and an empty barrier per stage
      if (t.split == WarpgroupSplit::dims) {
        const std::size_t dqk32 = round_up(spec.dim_qk, 32), dv32 = round_up(spec.dim_v, 32);
        const std::size_t stages = backward_dims_split_stages(spec, t);
        const std::size_t v_tile =
            flashgen_device::held_tile_elements(t.cached & kCacheV, int(rows * dv32));
        return kElementBytes * (rows * dqk32 + v_tile + stages * cols * (dqk32 + dv32)) +
               sizeof(float) * stages * 2 * cols + 2 * 128 * 4 * (cols / 2 + cols / 8) +
               producer_barrier_bytes(t, stages);
      }
      // split=outputs: k [64][dqk], v [64][dv]; two stages of q [cols][dqk],
      // dO [cols][dv], lse and dterm [cols]; the hand-over of Pᵀ [2][cols / 2][128
      // threads] fp32; a full and an empty barrier per stage
      if (t.split == WarpgroupSplit::outputs)
        return kElementBytes * (rows * (dqk16 + dv16) + 2 * cols * (dqk16 + dv16)) +
               sizeof(float) * (2 * 2 * cols + 2 * (cols / 2) * 128) + producer_barrier_bytes(t, 2);
      // wgmma: k [rows][dqk], v [rows][dv]; three stages of q [cols][dqk],
      // dO [cols][dv], lse and dterm [cols]; no padding (alignment class 1:
      // plus the staging of q and dO; with a producer warp, a full and an
      // empty barrier per stage)
      if (t.wgmma) {
        const std::size_t staging =
            spec.vec == 1 ? stage_elements(spec, cols, dqk16) + stage_elements(spec, cols, dv16) : 0;
        const std::size_t stages = kWgmmaBackwardStages;
        return kElementBytes * (rows * (dqk16 + dv16) + stages * cols * (dqk16 + dv16) + staging) +
               sizeof(float) * stages * 2 * cols + producer_barrier_bytes(t, stages);
      }
      [[fallthrough]];
    case KernelKind::backward_atomic: {
      // k [rows][dqk], v [rows][dv], q [cols][dqk], dO [cols][dv]; lse, dterm [cols];
      // staged: q, dO; the atomic kernel adds dSᵀ [rows][cols] for its dQ GEMM.
      const std::size_t dqk = n * chunk_width(spec.dim_qk, n);
      const std::size_t dv = n * chunk_width(spec.dim_v, n);
      const std::size_t ds = spec.kind == KernelKind::backward_atomic ? rows * (cols + kRowPad) : 0;
      return kElementBytes * ((rows + cols) * (dqk + kRowPad) + (rows + cols) * (dv + kRowPad) +
                              stage_elements(spec, cols, dqk) + stage_elements(spec, cols, dv) +
                              ds) +
             sizeof(float) * 2 * cols;
    }
    case KernelKind::backward_prepare:
    case KernelKind::convert_grad_q: return 0;
  }
  return 0;
}

GeneratedKernel generate(const KernelSpec& spec, const TuningParams& t) {
  check_tuning(spec, t);
  const KindInfo kind = info_of(spec, t);
  GeneratedKernel g;
  g.name = spec.to_string() + " | " + t.to_string();
  g.entry = kind.entry;
  // A producer warp comes as a whole warpgroup (setmaxnreg is per warpgroup).
  g.threads = is_row_kernel(spec.kind) ? kRowKernelThreads : (t.warps + (t.producer ? 4 : 0)) * 32;
  g.shared_bytes = shared_bytes(spec, t);

  std::ostringstream s;
  s << "// flashgen kernel: " << g.name << "\n"
    << "#include \"" << kind.header << "\"\n\n"
    << "namespace fg = flashgen_device;\n\n"
    << "struct Config {\n"
    << "  static constexpr int kElement = " << element_constant(spec.dtype) << ";\n"
    << "  static constexpr int kDimQK = " << spec.dim_qk << ";\n"
    << "  static constexpr int kDimV = " << spec.dim_v << ";\n"
    << "  static constexpr bool kCausal = " << (spec.causal ? "true" : "false") << ";\n"
    << "  static constexpr int kVec = " << spec.vec << ";\n";
  if (!is_row_kernel(spec.kind)) {
    s << "  static constexpr int kWarps = " << t.warps << ";\n"
      << "  static constexpr int kRowTiles = " << t.row_tiles() << ";\n"
      << "  static constexpr int kBlockN = " << t.block_cols << ";\n"
      << "  static constexpr int kHeadChunks = " << head_chunks_of(spec, t) << ";\n"
      << "  static constexpr bool kCacheQ = " << ((t.cached & kCacheQ) ? "true" : "false") << ";\n"
      << "  static constexpr bool kCacheK = " << ((t.cached & kCacheK) ? "true" : "false") << ";\n"
      << "  static constexpr bool kCacheV = " << ((t.cached & kCacheV) ? "true" : "false") << ";\n"
      << "  static constexpr bool kCacheGradO = " << ((t.cached & kCacheGradO) ? "true" : "false")
      << ";\n";
    if (t.wgmma && spec.kind == KernelKind::forward)
      s << "  static constexpr int kStages = " << wgmma_forward_stages(t) << ";\n";
    if (t.wgmma)
      s << "  static constexpr bool kTma = " << (t.tma ? "true" : "false") << ";\n"
        << "  static constexpr int kSwizzle = " << t.swizzle << ";\n";
    if (t.split == WarpgroupSplit::dims && spec.kind == KernelKind::backward_query)
      s << "  static constexpr int kKeyStages = " << backward_dims_split_stages(spec, t) << ";\n"
        << "  static constexpr int kValueStages = 2;\n";
    if (t.split == WarpgroupSplit::dims && spec.kind == KernelKind::backward_key_value)
      s << "  static constexpr int kStages = " << backward_dims_split_stages(spec, t) << ";\n";
  }
  s << "};\n\n"
    << "using Kernel = fg::" << kind.kernel << "<Config>;\n";
  if (!is_row_kernel(spec.kind))
    s << "static_assert(sizeof(Kernel::SharedStorage) == " << g.shared_bytes
      << ", \"host and device disagree on the shared-memory layout\");\n";
  // min 1 CTA per SM: ptxas may use up to 255 registers rather than spill to
  // fit an occupancy target of its own; the tuning decides occupancy.
  // TMA kernels also take their tensor maps, as parameters the copies read
  // in place (__grid_constant__); TMA writes shared memory 128-byte aligned.
  g.tensor_maps = t.tma;
  g.swizzle = t.swizzle;
  s << "\nextern \"C\" __global__ void __launch_bounds__(" << g.threads << ", 1) " << g.entry << "(const fg::AttentionParams params"
    << (g.tensor_maps ? ", const __grid_constant__ fg::TraversedTensorMaps maps" : "") << ") {\n"
    << "  extern __shared__ __align__(" << (t.swizzle != 0 ? 1024 : 128)
    << ") unsigned char shared[];\n"
    << "  Kernel::run(params, " << (g.tensor_maps ? "maps, " : "") << "shared);\n"
    << "}\n";
  g.source = s.str();
  return g;
}

}  // namespace flashgen
