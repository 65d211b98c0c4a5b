// What a generated kernel computes (KernelSpec) and how (TuningParams): two
// value types with one canonical to_string() each, used in cache keys, logs,
// test names and benchmark rows.
#pragma once

#include <string>

#include "flashgen/flashgen.hpp"

namespace flashgen {

enum class KernelKind {
  forward,             // O, LSE
  backward_query,      // dQ and Dterm (3 GEMMs)
  backward_key_value,  // dK, dV (4 GEMMs)
  backward_atomic,     // dK, dV and fp32 dQ partials added atomically (5 GEMMs)
  backward_prepare,    // atomic backward: Dterm, and the fp32 dQ accumulator zeroed
  convert_grad_q,      // atomic backward: fp32 dQ accumulator -> dQ in the input dtype
  forward_combine,     // split-key forward: the shares' partial O and LSE -> O, LSE
  backward_sinks,      // with sinks: dL/dsink per query head, from LSE and Dterm
  mask_blocks,         // with a user mask: its ranges of attended cells (and its faults)
};
const char* to_string(KernelKind kind);

// Where the split-key forward's keys and values lie: the call's K and V,
// or a KV cache read in place (each batch entry's cached rows, then the
// call's appended ones; copy/cache_rows.cuh), contiguous or paged.
enum class KeyCache { none, contiguous, paged };
const char* to_string(KeyCache cache);

struct KernelSpec {
  KernelKind kind = KernelKind::forward;
  DType dtype = DType::bf16;  // of Q, K, V, O (and dO, dQ, dK, dV)
  int dim_qk = 0;
  int dim_v = 0;
  // Keys past query i + an offset are masked: causal, or a sliding window's
  // right edge (src/cuda/device/softmax/mask.cuh).
  bool causal = false;
  // Alignment class, in elements, shared by every tensor: 8 (16-byte rows and
  // pointers), 4, 2 or 1 (contiguous rows), 0 (a dim stride other than 1).
  int vec = 8;
  std::string arch = "sm_90a";
  // Forward only: the CTAs of a query block share its key blocks and write
  // fp32 partial results that forward_combine merges (decode, where the query
  // blocks alone leave most of the GPU idle). The mma.sync kernel.
  bool split_keys = false;
  // Keys before query i + an offset are masked: a sliding window's left edge.
  bool window = false;
  // Logits soft-capped (c·tanh(s / c)): the kernels that compute P.
  bool softcap = false;
  // A logit per query head in each row's softmax denominator: the forward
  // (the combine kernel where the keys are split).
  bool sinks = false;
  // Logits less ALiBi's slope · distance from the diagonal: the kernels
  // that compute P.
  bool alibi = false;
  // A user mask (Options::mask_mod): its canonical text, and its arrays as
  // "name:i" (int32) or "name:f" (fp32), comma-separated in order. Empty:
  // none. The kernels that compute P and mask_blocks evaluate it.
  std::string mask_mod;
  std::string mask_arrays;
  // The split-key forward over a KV cache (forward_with_kvcache), whose
  // keys and values are fp8 (e4m3) bytes with scales where fp8_cache.
  KeyCache cache = KeyCache::none;
  bool fp8_cache = false;
  // Packed sequences (forward_varlen, backward_varlen on the GPU): each CTA
  // runs over its batch entry's sequence (device/scheduler/sequences.cuh).
  // The tile kernels (forward, backward_query, backward_key_value), copied
  // without TMA.
  bool varlen = false;

  // "forward bf16 dqk=127 dv=127 causal=0 vec=1 sm_90a" (" window",
  // " softcap", " sinks", " alibi", " split_keys", " kv_cache=contiguous|paged"
  // (" e4m3" after it for an fp8 cache), " varlen"
  // and " mask=<16 hex digits of the mask's text>" after it when set)
  std::string to_string() const;
  bool operator==(const KernelSpec&) const = default;
};

// Operands a kernel may hold in registers for its whole life (cached) rather
// than re-read from shared memory every iteration (spilled).
enum CachedOperand : unsigned {
  kCacheQ = 1u << 0,
  kCacheK = 1u << 1,
  kCacheV = 1u << 2,
  kCacheGradO = 1u << 3,
};

// What the computing warpgroups of a wgmma CTA (the warps of an mma.sync
// forward, split=keys) divide among them.
enum class WarpgroupSplit {
  rows,  // each owns its own 64 rows (the default)
  // The wide-head backward kernels (rows=64 warps=8 head=0, TMA), where two
  // warpgroups share 64 rows and split the head dims, so no GEMM is
  // computed per column chunk (kernels/backward_query/wgmma_split.cuh,
  // kernels/backward_key_value/wgmma_dims.cuh).
  dims,
  // The wide-head key/value backward (rows=64 warps=8 head=0, TMA): two
  // warpgroups over the same 64 keys, one computing Sᵀ and dV, the other
  // dPᵀ and dK (kernels/backward_key_value/wgmma_split.cuh).
  outputs,
  // The mma.sync forward over one 16-row tile (rows=16): its warps share
  // the rows and split each key block, each with its own softmax and output
  // over its keys, merged at the end. Decode's few rows (a GQA group's query
  // heads) then take a CTA's warps without each warp repeating the GEMMs.
  keys,
};
const char* to_string(WarpgroupSplit split);

struct TuningParams {
  int block_rows = 64;  // rows a CTA owns (queries; keys for key/value kernels)
  int block_cols = 64;  // rows of the traversed block per iteration
  int head_block = 0;   // value-dim columns per CTA (multiple of 16); 0 = all of Dv
  int warps = 4;
  unsigned cached = 0;  // CachedOperand bits
  // sm_90a, rows aligned to 4 bytes or more: Hopper's warpgroup MMA
  // (kernels/forward/wgmma.cuh, kernels/backward_key_value/wgmma.cuh) instead of mma.sync;
  // one 16-row tile per warp, whole warpgroups.
  bool wgmma = false;
  // Pipeline stages of the traversed K and V tiles in the forward (copies
  // run this many blocks minus one ahead); 0: the kernel's default (wgmma:
  // 2; mma.sync: one K and one V buffer, each copied while the other is read).
  int stages = 0;
  // A wgmma kernel with one more warpgroup whose first warp only copies the
  // traversed tiles (*_wgmma_producer.cuh):
  // warpgroups synchronise with it per stage instead of with each other per
  // block. The forward needs 3 stages or more (the default when set).
  bool producer = false;
  // The producer copies the traversed tiles with the Tensor Memory
  // Accelerator (one cp.async.bulk.tensor per 8-column slice of a tile,
  // completing on the stage's barrier) instead of cp.async: the wgmma
  // kernels with producer=warp on 16-byte aligned rows (sm_90a).
  bool tma = false;
  // What the warpgroups of a wgmma CTA divide among them.
  WarpgroupSplit split = WarpgroupSplit::rows;
  // With copy=tma: 0, the traversed tiles in the no-swizzle core-matrix layout,
  // copied as 8-column slices (16 bytes a row: half an L2 sector per row); 32,
  // in the 32-byte-swizzled layout, copied as 16-column panels (a whole sector
  // a row). The wgmma kernels with copy=tma.
  int swizzle = 0;
  // The wgmma forward with copy=tma on 16-byte rows (schedule=persistent):
  // a CTA per SM walks the tiles a CTA each would have had, in their launch
  // order, its producer copying the next tile's K and V and its warpgroups
  // the next tile's Q while they still compute (kernels/forward/wgmma_producer.cuh).
  bool persistent = false;
  // The wgmma forward, backward_query and backward_key_value with
  // producer=warp and two or more computing warpgroups (pingpong=1): the
  // warpgroups issue their GEMMs in turns, so that one's softmax runs while
  // another's GEMMs do (pipeline/gemm_turns.cuh).
  bool pingpong = false;

  // 16-row tiles per warp (one where two warpgroups split their 64 rows' work).
  int row_tiles() const {
    return split == WarpgroupSplit::rows ? block_rows / (16 * warps) : 1;
  }
  // "rows=128 cols=64 head=128 warps=4 cache=Q" [" mma=wgmma"] [" stages=3"]
  // [" producer=warp"] [" copy=tma"] [" split=dims|outputs|keys"] [" swizzle=32"]
  // [" schedule=persistent"] [" pingpong=1"]
  std::string to_string() const;
  bool operator==(const TuningParams&) const = default;
};

// Parses the output of TuningParams::to_string(); throws Error(invalid_argument).
TuningParams parse_tuning(const std::string& text);

}  // namespace flashgen
