// The shared-memory layout of every kernel family, as sizes: plain C++ with no
// includes, compiled by the host (src/codegen/shared_memory.cpp sizes the
// launch with it) and by NVRTC (each kernel static_asserts that its
// SharedStorage has this size), so the two cannot drift. Each function lists
// the regions of its kernel's SharedStorage in order; tiles are u16 elements,
// row statistics fp32, barriers 8-byte mbarriers.
#pragma once

namespace flashgen_device {

// What a kernel's layout depends on: the Config the generator writes, in
// the host's and the device's terms alike.
struct SharedShape {
  int dim_qk, dim_v;  // the user's head dims
  int vec;            // alignment class (8: 16-byte rows; 4, 2, 1: staged; 0: strided)
  int rows, cols;     // the CTA's own rows, the traversed block's rows
  int head_chunks;    // CTAs sharing a row block, each with a chunk of the output columns
  int stages;         // pipeline stages where the tuning sets them (0 elsewhere)
  bool producer;      // a producer warpgroup: a full and an empty mbarrier per stage
  bool persistent;    // the forward's tile walk (schedule=persistent): a second Q tile
  bool token_rows;    // TMA on rows not 16-byte aligned: wider tiles, the fixed stages' barriers
  bool fp8_cache;     // K and V of an fp8 KV cache: converting copies' staging
  bool cache_q, cache_k, cache_v, cache_grad_o;  // operands held in registers
};

constexpr unsigned long long kTileElementBytes = 2;  // bf16 / f16
constexpr unsigned long long kStatBytes = 4;         // fp32 LSE, Dterm, partial sums
constexpr unsigned long long kBarrierBytes = 8;      // one mbarrier
// Elements of padding per row of the mma.sync kernels' tiles: 16 bytes, so
// the eight rows one ldmatrix reads start in distinct bank groups.
constexpr int kSharedRowPad = 8;
// The exchanges of two warpgroups hold a slot per thread of a warpgroup.
constexpr int kExchangeSlots = 128;
// The wgmma backward kernels traverse three stages (the query kernel's V
// two without a producer warpgroup).
constexpr int kWgmmaBackwardStages = 3;
// The fp32 kernels (kernels/f32/simt.cuh): 32 traversed rows, output
// columns in chunks of 32.
constexpr int kF32TraversedRows = 32;

constexpr int layout_round_up(int a, int b) { return (a + b - 1) / b * b; }

// Columns of one chunk when a dim is split in `chunks` (a multiple of 16).
constexpr int layout_chunk_width(int dim, int chunks) {
  return layout_round_up((layout_round_up(dim, 16) + chunks - 1) / chunks, 16);
}

// Token-row tiles (TMA on rows that are not 16-byte aligned:
// kernels/forward/wgmma_producer.cuh) start at the 32-byte boundary at or
// before their head's first column (kTokenRowAlign elements), up to
// kTokenRowAlign - vec elements before it, so they are that much wider than
// the `cols` columns they hold.
constexpr int kTokenRowAlign = 16;
constexpr int token_row_tile_width(int cols, int vec) {
  return layout_round_up(cols + kTokenRowAlign - vec, 16);
}

// Value columns of a wgmma forward CTA: O lives in its warpgroups'
// registers, 256 columns in one product (wgmma's widest n) and the rest, a
// token-row tile's widening past 256, in a second
// (kernels/forward/wgmma_steps.cuh).
constexpr int kForwardMostValueColumns = 288;

// The width of a wgmma kernel's tile of a head's `cols` columns, on token
// rows or not; and the forward's V tile for a CTA of one of `chunks` value
// chunks (the n of O = P·V).
constexpr int head_tile_width(int cols, int vec, bool token_rows) {
  return token_rows ? token_row_tile_width(cols, vec) : layout_round_up(cols, 16);
}
// The width of a split=dims kernel's tile of a head's `cols` columns: a
// multiple of 32, so that each warpgroup's half is whole k steps (token
// rows: widened first).
constexpr int split_dims_tile_width(int cols, int vec, bool token_rows) {
  return layout_round_up(head_tile_width(cols, vec, token_rows), 32);
}
constexpr int forward_value_tile_width(int dim_v, int chunks, int vec, bool token_rows) {
  const int chunk = layout_chunk_width(dim_v, chunks);
  return token_rows ? token_row_tile_width(chunk < dim_v ? chunk : dim_v, vec) : chunk;
}

// Elements of a shared-memory tile of `elements` whose operand a kernel may
// hold in registers instead (cache=K, V, Q, dO of the backward kernels with
// split=dims): held, a placeholder of 1024 bytes, which keeps the tiles after
// it aligned as TMA and the swizzled layouts need.
constexpr int held_tile_elements(bool held, int elements) { return held ? 512 : elements; }

// Elements of the staging area of a [rows][cols] tile copied as the aligned
// 16-byte chunks around its rows (alignment classes 1, 2, 4; TileCopy in
// copy/tile_copy.cuh).
constexpr unsigned long long staging_elements(int vec, int rows, int cols) {
  return vec >= 1 && vec < 8 ? (unsigned long long)rows * (cols / 8 + 1) * 8 : 0;
}

// Whether a kernel over an fp8 cache reads its e4m3 bytes into the MMA
// fragments (arch/warp_gemm_e4m3.cuh), with no converted K and V tiles:
// rows 8-byte aligned (alignment class 8; the cache's elements are bytes)
// and whole 16-column chunks.
constexpr bool e4m3_fragments(bool fp8_cache, int vec, int dim_qk, int dim_v) {
  return fp8_cache && vec == 8 && dim_qk % 16 == 0 && dim_v % 16 == 0;
}
// What such a kernel keeps of each of its K and V tiles, in 16-bit
// elements: a 16-byte placeholder (the fragments read the staging).
constexpr int kE4m3TilePlaceholder = 8;

// Elements of the staging area of a [rows][cols] tile of an fp8 cache
// (QuantizedCacheCopy in copy/quantized_cache.cuh): a row's bytes as the
// aligned 16-byte chunks around them, then a byte per row.
constexpr unsigned long long fp8_staging_elements(int rows, int cols) {
  return ((unsigned long long)rows * (cols / 16 + 1) * 16 + rows) / 2;
}

// The staging area of a tile of the split-key forward's K or V.
constexpr unsigned long long traversed_staging_elements(const SharedShape& s, int rows, int cols) {
  return s.fp8_cache ? fp8_staging_elements(rows, cols) : staging_elements(s.vec, rows, cols);
}

// A producer warpgroup's pipeline of `stages`: a full and an empty barrier each.
constexpr unsigned long long pipeline_barrier_bytes(bool producer, int stages) {
  return producer ? 2 * stages * kBarrierBytes : 0;
}

// The staging areas of both traversed tiles (`first_cols`, `second_cols`
// wide) of a wgmma kernel on rows only 2-byte aligned whose computing warps
// copy them (no producer: one copies straight, or by TMA).
constexpr unsigned long long wgmma_staging_elements(const SharedShape& s, int first_cols,
                                                    int second_cols) {
  return s.vec == 1 && !s.producer ? staging_elements(s.vec, s.cols, first_cols) +
                                         staging_elements(s.vec, s.cols, second_cols)
                                   : 0;
}

// The barriers of a producer's `pipelines` pipelines of `stages` each, and
// on token rows of the fixed stages' too (FixedStages, before them).
constexpr unsigned long long producer_barrier_bytes(const SharedShape& s, int pipelines,
                                                    int stages) {
  return (pipelines + (s.token_rows ? 1 : 0)) * pipeline_barrier_bytes(s.producer, stages);
}

// ---- forward ----

// mma.sync (kernels/forward/mma_sync.cuh): q [rows][dqk], k [cols][dqk],
// v [cols][dv chunk], rows padded, `stages` of k and v in a ring (0: one);
// staged (or an fp8 cache's): one k and v, and the stages' staging: k's,
// then v's; e4m3 fragments: a 16-byte placeholder for each of k and v.
constexpr unsigned long long forward_mma_sync_shared_bytes(const SharedShape& s) {
  const int dqk = layout_round_up(s.dim_qk, 16), dv = layout_chunk_width(s.dim_v, s.head_chunks);
  const unsigned long long stages = s.stages >= 2 ? s.stages : 1;
  const unsigned long long staging =
      traversed_staging_elements(s, s.cols, dqk) + traversed_staging_elements(s, s.cols, dv);
  const unsigned long long tile_stages = staging != 0 ? 1 : stages;
  const bool no_tiles = e4m3_fragments(s.fp8_cache, s.vec, s.dim_qk, s.dim_v);
  const unsigned long long k_tile =
      no_tiles ? kE4m3TilePlaceholder : s.cols * (dqk + kSharedRowPad);
  const unsigned long long v_tile =
      no_tiles ? kE4m3TilePlaceholder : s.cols * (dv + kSharedRowPad);
  return kTileElementBytes * ((unsigned long long)s.rows * (dqk + kSharedRowPad) +
                              tile_stages * (k_tile + v_tile) + stages * staging);
}

// wgmma (kernels/forward/wgmma.cuh, wgmma_producer.cuh): q [rows][dqk]
// (two of them when persistent: the next tile's fills the second), `stages` stages of k [cols][dqk] and v [cols][dv chunk], no padding;
// staged (alignment class 1 without a producer): k, v; with a producer, the
// barriers of two pipelines (K, V), three on token rows (the fixed K stages
// first), whose tiles are wider (token_row_tile_width).
constexpr unsigned long long forward_wgmma_shared_bytes(const SharedShape& s) {
  const int dqk = head_tile_width(s.dim_qk, s.vec, s.token_rows);
  const int dv = forward_value_tile_width(s.dim_v, s.head_chunks, s.vec, s.token_rows);
  const unsigned long long staging = wgmma_staging_elements(s, dqk, dv);
  const int query_buffers = s.persistent ? 2 : 1;
  return kTileElementBytes * ((unsigned long long)query_buffers * s.rows * dqk +
                              (unsigned long long)s.stages * s.cols * (dqk + dv) + staging) +
         producer_barrier_bytes(s, 2, s.stages);
}

// ---- backward_query ----

// mma.sync (kernels/backward_query/mma_sync.cuh): q [rows][dqk], dO
// [rows][dv], k [cols][dqk], v [cols][dv], rows padded; staged: k, v; lse
// and dterm [rows].
constexpr unsigned long long backward_query_mma_sync_shared_bytes(const SharedShape& s) {
  const int dqk = s.head_chunks * layout_chunk_width(s.dim_qk, s.head_chunks);
  const int dv = layout_round_up(s.dim_v, 16);
  return kTileElementBytes * ((unsigned long long)(s.rows + s.cols) * (dqk + kSharedRowPad) +
                              (unsigned long long)(s.rows + s.cols) * (dv + kSharedRowPad) +
                              staging_elements(s.vec, s.cols, dqk) +
                              staging_elements(s.vec, s.cols, dv)) +
         kStatBytes * 2 * s.rows;
}

// wgmma (kernels/backward_query/wgmma.cuh, wgmma_producer.cuh): q [rows][dqk],
// dO [rows][dv]; three stages of k [cols][dqk], of v [cols][dv] two (a
// producer keeps V as deep as K); staged (class 1 without a producer): k, v;
// lse and dterm [rows]; with a producer, the barriers of one pipeline (two on
// token rows, the fixed stages' first), whose tiles are wider.
constexpr unsigned long long backward_query_wgmma_shared_bytes(const SharedShape& s) {
  const int dqk = head_tile_width(s.dim_qk, s.vec, s.token_rows);
  const int dv = head_tile_width(s.dim_v, s.vec, s.token_rows);
  const unsigned long long staging = wgmma_staging_elements(s, dqk, dv);
  const int stages = kWgmmaBackwardStages, value_stages = s.producer ? stages : 2;
  return kTileElementBytes * ((unsigned long long)s.rows * (dqk + dv) +
                              (unsigned long long)stages * s.cols * dqk +
                              (unsigned long long)value_stages * s.cols * dv + staging) +
         kStatBytes * 2 * s.rows +
         producer_barrier_bytes(s, 1, stages);
}

// The exchanges of two warpgroups that split the head dims
// (pipeline/warpgroup_exchange.cuh): [2 warpgroups][128 threads] of partial
// sums (cols / 2 floats) and of A-fragment words (cols / 8).
constexpr unsigned long long dims_exchange_bytes(int cols) {
  return 2ull * kExchangeSlots * 4 * (cols / 2 + cols / 8);
}

// split=dims (kernels/backward_query/wgmma_split.cuh): q [64][dqk], dO
// [64][dv] (split_dims_tile_width; a held one a placeholder); `stages`
// stages of k [cols][dqk], two of v [cols][dv]; lse and dterm [64]; the
// exchanges; the barriers of the K and the V pipelines (on token rows the
// fixed stages' before them, as deep as V's).
constexpr unsigned long long backward_query_dims_shared_bytes(const SharedShape& s) {
  const int dqk = split_dims_tile_width(s.dim_qk, s.vec, s.token_rows);
  const int dv = split_dims_tile_width(s.dim_v, s.vec, s.token_rows);
  const int value_stages = 2;
  return kTileElementBytes *
             ((unsigned long long)held_tile_elements(s.cache_q, s.rows * dqk) +
              held_tile_elements(s.cache_grad_o, s.rows * dv) +
              (unsigned long long)s.stages * s.cols * dqk +
              (unsigned long long)value_stages * s.cols * dv) +
         kStatBytes * 2 * s.rows + dims_exchange_bytes(s.cols) +
         pipeline_barrier_bytes(true, s.stages) + producer_barrier_bytes(s, 1, value_stages);
}

// ---- backward_key_value and backward_atomic ----

// mma.sync (kernels/backward_key_value/mma_sync.cuh): k [rows][dqk], v
// [rows][dv], q [cols][dqk], dO [cols][dv], rows padded; staged: q, dO; the
// atomic kernel's dSᵀ [rows][cols] for its dQ GEMM; lse and dterm [cols].
constexpr unsigned long long backward_key_value_mma_sync_shared_bytes(const SharedShape& s,
                                                                     bool atomic) {
  const int dqk = s.head_chunks * layout_chunk_width(s.dim_qk, s.head_chunks);
  const int dv = s.head_chunks * layout_chunk_width(s.dim_v, s.head_chunks);
  const unsigned long long ds = atomic ? (unsigned long long)s.rows * (s.cols + kSharedRowPad) : 0;
  return kTileElementBytes * ((unsigned long long)(s.rows + s.cols) * (dqk + kSharedRowPad) +
                              (unsigned long long)(s.rows + s.cols) * (dv + kSharedRowPad) +
                              staging_elements(s.vec, s.cols, dqk) +
                              staging_elements(s.vec, s.cols, dv) + ds) +
         kStatBytes * 2 * s.cols;
}

// wgmma (kernels/backward_key_value/wgmma.cuh, wgmma_producer.cuh): k
// [rows][dqk], v [rows][dv]; three stages of q [cols][dqk], dO [cols][dv],
// lse and dterm [cols]; staged (class 1 without a producer): q, dO; with a
// producer, the barriers of one pipeline (two on token rows, the fixed
// stages' first), whose tiles are wider.
constexpr unsigned long long backward_key_value_wgmma_shared_bytes(const SharedShape& s) {
  const int dqk = head_tile_width(s.dim_qk, s.vec, s.token_rows);
  const int dv = head_tile_width(s.dim_v, s.vec, s.token_rows);
  const unsigned long long staging = wgmma_staging_elements(s, dqk, dv);
  const int stages = kWgmmaBackwardStages;
  return kTileElementBytes * ((unsigned long long)s.rows * (dqk + dv) +
                              (unsigned long long)stages * s.cols * (dqk + dv) + staging) +
         kStatBytes * stages * 2 * s.cols +
         producer_barrier_bytes(s, 1, stages);
}

// split=outputs (kernels/backward_key_value/wgmma_split.cuh): k [64][dqk],
// v [64][dv]; two stages of q [cols][dqk], dO [cols][dv], lse and dterm
// [cols]; the hand-over of Pᵀ [2][cols / 2][128 threads] fp32; the barriers
// of one pipeline (two on token rows, the fixed stages' first), whose tiles
// are wider.
constexpr unsigned long long backward_key_value_outputs_shared_bytes(const SharedShape& s) {
  const int dqk = head_tile_width(s.dim_qk, s.vec, s.token_rows);
  const int dv = head_tile_width(s.dim_v, s.vec, s.token_rows);
  const int stages = 2;
  return kTileElementBytes * ((unsigned long long)s.rows * (dqk + dv) +
                              (unsigned long long)stages * s.cols * (dqk + dv)) +
         kStatBytes * (stages * 2ull * s.cols + 2ull * (s.cols / 2) * kExchangeSlots) +
         producer_barrier_bytes(s, 1, stages);
}

// split=dims (kernels/backward_key_value/wgmma_dims.cuh): k [64][dqk], v
// [64][dv] (split_dims_tile_width; V held: a placeholder); `stages` stages
// of q [cols][dqk], dO [cols][dv], lse and dterm [cols]; the exchanges; the
// barriers of one pipeline (two on token rows, the fixed stages' first).
constexpr unsigned long long backward_key_value_dims_shared_bytes(const SharedShape& s) {
  const int dqk = split_dims_tile_width(s.dim_qk, s.vec, s.token_rows);
  const int dv = split_dims_tile_width(s.dim_v, s.vec, s.token_rows);
  const int query_buffers = s.persistent ? 2 : 1;
  return kTileElementBytes * ((unsigned long long)query_buffers * s.rows * dqk +
                              held_tile_elements(s.cache_v, s.rows * dv) +
                              (unsigned long long)s.stages * s.cols * (dqk + dv)) +
         kStatBytes * s.stages * 2ull * s.cols + dims_exchange_bytes(s.cols) +
         producer_barrier_bytes(s, 1, s.stages);
}

// ---- fp32 (kernels/f32/) ----

// Output columns of one fp32 chunk: a multiple of 32.
constexpr int f32_chunk_width(int dim, int chunks) {
  return layout_round_up((dim + chunks - 1) / chunks, 32);
}
// Row widths of the traversed tiles: odd, so the 32 lanes reading a column
// hit 32 banks.
constexpr int f32_odd_width(int cols) { return cols % 2 == 1 ? cols : cols + 1; }

// q [rows][dqk], k [32][odd dqk], v [32][dv chunk]; the warps' own rows are
// read 16 bytes at a time: widths rounded up to 4.
constexpr unsigned long long forward_f32_shared_bytes(const SharedShape& s) {
  const int dqk = layout_round_up(s.dim_qk, 4);
  return kStatBytes * ((unsigned long long)s.rows * dqk +
                       (unsigned long long)kF32TraversedRows * f32_odd_width(dqk) +
                       (unsigned long long)kF32TraversedRows *
                           f32_chunk_width(s.dim_v, s.head_chunks));
}

// The two fp32 backward kernels: their own rows' tiles [rows][dqk] and
// [rows][dv]; the traversed tiles [32][odd chunks of dqk] and [32][odd
// `second_width`]; lse and dterm [`stat_rows`].
constexpr unsigned long long backward_f32_shared_bytes(const SharedShape& s, int second_width,
                                                       int stat_rows) {
  const int dqk = layout_round_up(s.dim_qk, 4), dv = layout_round_up(s.dim_v, 4);
  return kStatBytes *
         ((unsigned long long)s.rows * (dqk + dv) +
          (unsigned long long)kF32TraversedRows *
              f32_odd_width(f32_chunk_width(s.dim_qk, s.head_chunks) * s.head_chunks) +
          (unsigned long long)kF32TraversedRows * f32_odd_width(second_width) + 2ull * stat_rows);
}

// q, dO [rows][..]; k [32][odd chunks], v [32][odd dv]; lse and dterm [rows].
constexpr unsigned long long backward_query_f32_shared_bytes(const SharedShape& s) {
  return backward_f32_shared_bytes(s, layout_round_up(s.dim_v, 4), s.rows);
}

// k, v [rows][..]; q, dO [32][odd chunks]; lse and dterm [32].
constexpr unsigned long long backward_key_value_f32_shared_bytes(const SharedShape& s) {
  return backward_f32_shared_bytes(s, f32_chunk_width(s.dim_v, s.head_chunks) * s.head_chunks,
                                   kF32TraversedRows);
}

}  // namespace flashgen_device
