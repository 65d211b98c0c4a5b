// Shared memory per CTA of a (spec, tuning) pair: the layout functions of
// the device header layout/shared_memory.cuh, which NVRTC compiles too, fed
// with the Config the generator writes for the pair.
#include "codegen/generate.hpp"
#include "cuda/device/layout/shared_memory.cuh"

namespace flashgen {

namespace fd = flashgen_device;

// The layout's inputs as generate() writes them into the Config.
static fd::SharedShape shared_shape(const KernelSpec& spec, const TuningParams& t) {
  fd::SharedShape s{};
  s.dim_qk = spec.dim_qk;
  s.dim_v = spec.dim_v;
  s.vec = spec.vec;
  s.rows = t.block_rows;
  s.cols = t.block_cols;
  s.head_chunks = head_chunks_of(spec, t);
  s.producer = t.producer;
  s.persistent = t.persistent;
  s.token_rows = t.tma && spec.vec < 8;  // tma_copies(): the forward and the two-kernel backward
  s.fp8_cache = spec.fp8_cache;
  s.cache_q = (t.cached & kCacheQ) != 0;
  s.cache_k = (t.cached & kCacheK) != 0;
  s.cache_v = (t.cached & kCacheV) != 0;
  s.cache_grad_o = (t.cached & kCacheGradO) != 0;
  if (t.split == WarpgroupSplit::dims)
    s.stages = backward_dims_split_stages(spec, t);
  else if (t.wgmma && spec.kind == KernelKind::forward)
    s.stages = wgmma_forward_stages(t);
  else if (spec.kind == KernelKind::forward)
    s.stages = t.stages;  // the mma.sync forward's ring (0: its two buffers)
  return s;
}

std::size_t shared_bytes(const KernelSpec& spec, const TuningParams& t) {
  const fd::SharedShape s = shared_shape(spec, t);
  if (spec.dtype == DType::f32) {
    switch (spec.kind) {
      case KernelKind::forward: return fd::forward_f32_shared_bytes(s);
      case KernelKind::backward_query: return fd::backward_query_f32_shared_bytes(s);
      case KernelKind::backward_key_value: return fd::backward_key_value_f32_shared_bytes(s);
      default: return 0;
    }
  }
  switch (spec.kind) {
    case KernelKind::forward:
      return t.wgmma ? fd::forward_wgmma_shared_bytes(s) : fd::forward_mma_sync_shared_bytes(s);
    case KernelKind::backward_query:
      if (t.split == WarpgroupSplit::dims) return fd::backward_query_dims_shared_bytes(s);
      return t.wgmma ? fd::backward_query_wgmma_shared_bytes(s)
                     : fd::backward_query_mma_sync_shared_bytes(s);
    case KernelKind::backward_key_value:
      if (t.split == WarpgroupSplit::dims) return fd::backward_key_value_dims_shared_bytes(s);
      if (t.split == WarpgroupSplit::outputs) return fd::backward_key_value_outputs_shared_bytes(s);
      return t.wgmma ? fd::backward_key_value_wgmma_shared_bytes(s)
                     : fd::backward_key_value_mma_sync_shared_bytes(s, false);
    case KernelKind::backward_atomic: return fd::backward_key_value_mma_sync_shared_bytes(s, true);
    case KernelKind::backward_prepare:
    case KernelKind::convert_grad_q:
    case KernelKind::forward_combine:
    case KernelKind::backward_sinks:
    case KernelKind::mask_blocks: return 0;
  }
  return 0;
}

}  // namespace flashgen
