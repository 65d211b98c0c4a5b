// The kernel family that serves a spec and its shape before tuning tables
// and score modifiers: the wgmma kernels on sm_90a where they fit (rows,
// registers, TMA), else mma.sync (mma_sync_shapes.cpp).
#include "codegen/wgmma_shapes.hpp"

#include <algorithm>

#include "codegen/generate.hpp"
#include "codegen/mma_sync_shapes.hpp"
#include "cuda/device/layout/shared_memory.cuh"

namespace flashgen {
namespace {

// On 16-byte aligned rows the wgmma kernels take a producer warpgroup that
// copies the traversed tiles with TMA (copy=tma) as whole 32-byte sectors
// into swizzled tiles (swizzle=32), which the computing warpgroups wait for
// per stage. Measured on the H200 (docs/decisions.md),
// against the same shapes copying with cp.async themselves: forward 424 / 455
// against 274 / 328 TFLOP/s at D = 64 / 128, 260 against 252 at D = 256, equal
// at 384; the query kernel's GEMMs 500 / 510 against 341 / 340 at D = 64 /
// 128; the key/value kernel's 316 / 416 against 268 / 373 (docs/decisions.md).
TuningParams with_tma_producer_where_aligned(const KernelSpec& spec, const TuningParams& t,
                                             int stages = 0) {
  return spec.vec == 8 ? with_tma_producer(t, stages) : t;
}

// Whether a wgmma kernel's default reads rows that are not 16-byte aligned
// through token-row views: where TMA may read them (`tma`), past 64 columns
// (measured there only, on the H100, docs/decisions.md: below that the
// shift's columns are a larger share of the tiles). Each kernel adds the
// widths its registers hold.
bool reads_token_rows(const KernelSpec& spec, bool tma) {
  return tma && spec.vec >= 1 && spec.vec < 8 && widest_dim(spec) > 64;
}

// Heads past 256 columns whose split=dims tiles (token rows: widened) stay
// within 512, half of each output in a warpgroup's registers; the caller
// knows that TMA may read the traversed tensors.
bool split_dims_fits(const KernelSpec& spec) {
  const bool wide = round_up(spec.dim_qk, 32) > 256 || round_up(spec.dim_v, 32) > 256;
  return spec.vec >= 1 && wide && split_dims_tiles_fit(spec);
}

// Forward on Hopper's warpgroup MMA (sm_90a, any contiguous rows: rows only
// 2-byte aligned are staged as the aligned 16-byte chunks around them).
// Each warpgroup owns 64 query rows and holds O (Dv / 2 registers per
// thread, at most 256 columns: past that Dv is split across CTAs of 256
// columns that each recompute S), S (cols / 2) and P (cols / 4). Three
// warpgroups (one CTA of 12 warps per SM) keep the tensor cores busier than
// two while the registers allow it (up to Dv = 128 with 64-key blocks, and
// with 32-key blocks per 256-column chunk past 256); default_tuning() drops
// to two when the shared memory does not fit.
// Measured on the H200 (docs/decisions.md): 274 / 331 / 278 TFLOP/s at D = 64 /
// 128 / 256 against 238 / 283 / 238 for the mma.sync forward; 210 / 172 at
// D = 384 / 512 against 136 / 140; 200 / 161 / 108 at D = 127 / 199 / 257
// (staged rows) against 186 / 99 / 78.
// With the TMA producer it is faster at every D, down to D = 8 and 16 (69 /
// 141 against 59 / 113 for the mma.sync forward); copying whole 32-byte
// sectors into swizzled tiles instead of 8-column slices (half sectors) took
// it from 465 / 372 / 231 / 181 to 572 / 580 / 315 / 278 TFLOP/s at D = 128 /
// 256 / 384 / 512, the same at 64 (the slices left it bound by the L2).
bool wgmma_forward_fits(const KernelSpec& spec) {
  return spec.kind == KernelKind::forward && spec.arch == "sm_90a" && spec.vec >= 1;
}

// Shapes of the tuner's winners on the H200 (non-causal, N = 8192), with
// the TMA producer on 16-byte aligned rows: three warpgroups up to 192
// columns (key blocks narrowing as the heads widen: 413 TFLOP/s at D = 176
// with 48 keys), two over 80-key blocks to 256 (374 at D = 256 against 278
// for 64-key blocks without a producer), where K and V two stages deep leave
// room for that width; past 256, chunks of 256 value columns, also two
// stages deep (230 / 179 at D = 384 / 512 against 209 / 171 without a
// producer).
TuningParams wgmma_forward_tuning(const KernelSpec& spec, bool tma) {
  // Token rows (TMA on rows that are not 16-byte aligned) widen the tiles
  // (token_row_tile_width): a head's value tile of up to 288 columns stays
  // one CTA's (O in two products), wider ones go in chunks of 256 value
  // columns, and a chunk widened past 256 (D = 497-512) without TMA (Q's
  // widened tile leaves room for 16-key blocks only).
  const int dv = round_up(spec.dim_v, 16);
  const bool token_rows = reads_token_rows(spec, tma);
  const bool one_value_tile =
      token_rows ? tile_width_v(spec, true, 1) <= flashgen_device::kForwardMostValueColumns
                 : dv <= 256;
  const int chunks = one_value_tile ? 1 : (dv + 255) / 256;
  const int token_value_width = tile_width_v(spec, true, chunks);
  if (token_rows && !one_value_tile && token_value_width > 256)
    return wgmma_forward_tuning(spec, false);
  const int widest = token_rows ? std::max(tile_width_qk(spec, true), token_value_width)
                                : widest_dim(spec);
  TuningParams t;
  int stages = 0;  // the producer's default: 3
  if (widest <= 64) {
    t = {192, 128, 0, 12, 0};
  } else if (widest <= 160) {
    t = {192, 64, 0, 12, 0};
    stages = 4;
  } else if (widest <= 192) {
    t = {192, 48, 0, 12, 0};
  } else if (one_value_tile) {
    // Past 256 columns (token rows) 80-key blocks two stages deep leave no
    // room beside Q's tile: 64.
    t = {128, widest <= 256 ? 80 : 64, 0, 8, 0};
    stages = 2;
  } else {
    t = {192, 32, 256, 12, 0};
    stages = 2;
    // Token rows whose widened chunks pass 176 columns (D > 320): three
    // computing warpgroups get 160 registers each beside the producer, too
    // few for the chunk's wgmma (D = 353); two get 232.
    if (token_rows && token_value_width > 176) t = {128, 32, 256, 8, 0};
  }
  t.wgmma = true;
  // The TMA producer on 16-byte rows, and on token rows (the forward's view
  // of other contiguous rows: kernels/forward/wgmma_producer.cuh) where the
  // caller's tensors allow (src/cuda/forward_route.cpp); `tma`: whether they do.
  if (tma && (spec.vec == 8 || token_rows)) t = with_tma_producer(t, stages);
  // Rows TMA cannot read (8-byte aligned) from 65 to 96 columns: the
  // producer's four warps copying four stages deep, +8% / +14% at D = 68 /
  // 76 over all warps copying (three stages: -5% / +1%). Elsewhere the
  // tuning tables may choose it.
  if (!t.tma && spec.vec == 4 && widest > 64 && widest <= 96) t = with_copying_producer(t, 4);
  return t;
}

// Query backward on wgmma (sm_90a): each warpgroup owns 64 query rows and
// holds dQ (Dqk / 2 registers per thread), S and dP. Measured on the H200:
// 351 / 333 / 348 TFLOP/s of its own GEMMs at D = 64 / 96 / 128 against
// 287 / 272 / 318 for the mma.sync kernel. Rows only 2-byte aligned (odd D)
// stage the traversed tiles; three warpgroups over 48-key blocks did best
// there (261 against 225 for mma.sync at D = 127; 209 with 128 x 64), and
// only past 64 columns was it measured. Wider heads are left to the tuning
// tables.
// From 129 to 256 columns the tuner chose it too, over 48-key blocks for three
// warpgroups to 192 columns (D = 136..176: +17-26% over the mma.sync
// kernel) and 32-48-key blocks for two past that (D = 208, 240: +21%, +11%).
bool wgmma_backward_query_fits(const KernelSpec& spec) {
  const int widest = widest_dim(spec);
  return spec.kind == KernelKind::backward_query && spec.arch == "sm_90a" && widest <= 256 &&
         (spec.vec >= 2 || (spec.vec == 1 && widest > 64));
}

// Odd dims past 64 columns whose rows TMA can read through token-row views
// (`tma`) get the TMA producer as on 16-byte rows, with the shape of their
// widened tiles (token_row_tile_width), while these fit dQ's registers.
TuningParams wgmma_backward_query_tuning(const KernelSpec& spec, bool tma) {
  const int widened = widest_token_row_tile(spec);
  const bool token_rows = reads_token_rows(spec, tma) && widened <= 256;
  const int widest = token_rows ? widened : widest_dim(spec);
  const bool staged = spec.vec == 1 && !token_rows;
  TuningParams t = widest > 192              ? TuningParams{128, 32, 0, 8, 0}
                   : staged || widest > 128  ? TuningParams{192, 48, 0, 12, 0}
                   : widest <= 64            ? TuningParams{192, 64, 0, 12, 0}
                                             : TuningParams{128, 64, 0, 8, 0};
  t.wgmma = true;
  return token_rows ? with_tma_producer(t) : with_tma_producer_where_aligned(spec, t);
}

// Key/value backward on wgmma (sm_90a) from 33 to 128 columns: two
// warpgroups of 64 keys hold dK and dV and traverse query blocks. Measured
// on the H200: 374 TFLOP/s of its GEMMs at D = 128 against 205 for the
// mma.sync kernel (the tuner's choice at D = 96 and 128), and 253 against
// 201 at D = 127 (staged rows); up to 64 columns over 96-query blocks, the
// tuner's choice at every D from 36 to 60 (+22-53% over the mma.sync kernel).
bool wgmma_backward_key_value_fits(const KernelSpec& spec) {
  const int widest = widest_dim(spec);
  return spec.kind == KernelKind::backward_key_value && spec.arch == "sm_90a" && spec.vec >= 1 &&
         widest > 32 && widest <= 128;
}

// Key/value backward on wgmma from 161 to 256 columns (dK and dV each up to
// 256, on 16-byte aligned rows): two warpgroups share 64 keys, one computing
// Sᵀ, Pᵀ and dV, the other dPᵀ and dK (split=outputs), so Sᵀ and dPᵀ are
// computed once where the mma.sync kernel recomputes them per column chunk.
// Measured on the H200 against that kernel's tuned rows, TFLOP/s of its own
// GEMMs (docs/decisions.md): 253 / 228 / 240 against 176 / 168 / 171 at D =
// 192 / 224 / 256, 289 against 175 at 256 causal; at 136 / 160 it lost
// (171 / 234 against 226 / 267; 160 causal won, 233 against 221).
// It copies by TMA only (`tma`: TMA may read the traversed tensors); on
// rows that are not 16-byte aligned through token-row views, where the
// widened tiles fit a warpgroup: 18.6 ms against 35.0 for the tuned
// mma.sync row at D = 199 (H100, B=2 H=16 N=8192 bf16).
bool wgmma_split_key_value_fits(const KernelSpec& spec, bool tma) {
  const int widest = widest_dim(spec);
  const bool readable =
      tma && (spec.vec == 8 || (spec.vec >= 1 && widest_token_row_tile(spec) <= 256));
  return spec.kind == KernelKind::backward_key_value && spec.arch == "sm_90a" && readable &&
         widest > 160 && widest <= 256;
}

TuningParams wgmma_split_key_value_tuning() {
  TuningParams t{64, 64, 0, 8, 0};
  t.wgmma = true;
  t.split = WarpgroupSplit::outputs;
  return with_tma_producer(t);
}

// Query backward on wgmma past 256 columns (each dim up to 512, on rows TMA
// may read: 16-byte aligned, or through token-row views with tiles up to
// 512 columns): two warpgroups share 64 query rows and split the head dims
// (split=dims), so S and dP are computed once where the mma.sync kernel
// recomputes them per 256-column chunk of dQ. Q, the A operand of S, held
// in registers (cache=Q): it leaves Q's tile out of shared memory, room
// for 32-key blocks three stages deep up to 448 columns (16 keys past
// that). Measured on the H200, milliseconds of the kernel at B=2 H=16
// N=8192 bf16 (docs/decisions.md): 11.1 / 13.9 at D = 288 / 384 against 13.8
// (mma.sync) / 24.8 (16 keys, Q in shared memory); 5.9 / 7.5 causal against
// 7.2 / 13.0; at 512, 16 keys, 31.3 against 31.6.
bool wgmma_split_query_fits(const KernelSpec& spec, bool tma) {
  return spec.kind == KernelKind::backward_query && spec.arch == "sm_90a" && tma &&
         split_dims_fits(spec);
}

TuningParams wgmma_split_query_tuning() {
  TuningParams t{64, 32, 0, 8, kCacheQ};
  t.wgmma = true;
  t.split = WarpgroupSplit::dims;
  return with_tma_producer(t, 3);
}

// Key/value backward past 256 columns (each dim up to 512, on rows TMA may
// read, as the query kernel's): a dV and a dK CTA per block of 64 keys, whose two
// warpgroups split the head dims (split=dims), so Sᵀ (and, in the dK CTA,
// dPᵀ) is computed once per CTA where the mma.sync kernel recomputes both
// per column chunk; the dV CTA's K and the dK CTA's V held in registers
// (cache=K,V). Measured on the H200 (docs/decisions.md), milliseconds of the
// kernel at B=2 H=16 N=8192, bf16, tuned rows: 36.2 / 61.9 / 84.5 at D =
// 384 / 448 / 512 against 65.2 / 107.2 / 129.9 for the mma.sync kernel's
// column chunks. Query blocks of 32 to 448 columns (past that the kernel
// spills), three stages deep where they fit, else two.
bool wgmma_dims_key_value_fits(const KernelSpec& spec, bool tma) {
  return spec.kind == KernelKind::backward_key_value && spec.arch == "sm_90a" && tma &&
         split_dims_fits(spec);
}

TuningParams wgmma_dims_key_value_tuning(const KernelSpec& spec) {
  const int widest = std::max(split_dims_tile_qk(spec), split_dims_tile_v(spec));
  TuningParams t{64, widest > 448 ? 16 : 32, 0, 8, kCacheK | kCacheV};
  t.wgmma = true;
  t.split = WarpgroupSplit::dims;
  return with_tma_producer(t, 3);
}

// Odd dims past 64 columns whose rows TMA can read through token-row views
// (`tma`: one query head per key/value head) get the TMA producer as on
// 16-byte rows, over 48-query blocks past 112 widened columns
// (token_row_tile_width). Measured on the H100 at B=2 H=16 N=8192 bf16,
// milliseconds of the kernel: 3.63 / 3.89 at D = 68 / 84 against 4.88 / 5.92
// for the tuned rows without TMA; at D = 100 (112 columns) 4.52 over 64-query
// blocks (a spill of 48 bytes) against 5.07 over 48; at D = 127 (144
// columns, a spill of 128 bytes) 6.75 against 9.14, and 7.52 over 32.
TuningParams wgmma_backward_key_value_tuning(const KernelSpec& spec, bool tma) {
  const int widened = widest_token_row_tile(spec);
  const bool token_rows = reads_token_rows(spec, tma) && widened <= 144;
  const int widest = token_rows ? widened : round_up(widest_dim(spec), 16);
  TuningParams t{128, widest <= 64 ? 96 : 64, 0, 8, 0};
  t.wgmma = true;
  if (token_rows) {
    if (widened > 112) t.block_cols = 48;
    return with_tma_producer(t);
  }
  // Past 112 columns dK and dV no longer fit the 240 registers a computing
  // warpgroup gets beside a producer (spills of 128 bytes at 120 and 128; it
  // still measured faster at 128, which the tuning tables may choose).
  if (widest <= 112) t = with_tma_producer_where_aligned(spec, t);
  return t;
}

}  // namespace

TuningParams shape_for(const KernelSpec& spec, bool tma) {
  if (spec.split_keys) return split_keys_tuning(spec);
  if (wgmma_forward_fits(spec)) return wgmma_forward_tuning(spec, tma);
  if (wgmma_backward_query_fits(spec)) return wgmma_backward_query_tuning(spec, tma);
  if (wgmma_backward_key_value_fits(spec)) return wgmma_backward_key_value_tuning(spec, tma);
  if (wgmma_split_key_value_fits(spec, tma)) return wgmma_split_key_value_tuning();
  if (wgmma_split_query_fits(spec, tma)) return wgmma_split_query_tuning();
  if (wgmma_dims_key_value_fits(spec, tma)) return wgmma_dims_key_value_tuning(spec);
  return mma_sync_shape_for(spec);
}

}  // namespace flashgen
