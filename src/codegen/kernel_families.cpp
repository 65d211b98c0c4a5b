#include "codegen/kernel_families.hpp"

#include <string>

#include "flashgen/flashgen.hpp"

namespace flashgen {

// fp32 tensors: the CUDA-core kernels of the deterministic backward and
// the forward (kernels/f32/).
KindInfo f32_info_of(KernelKind kind) {
  switch (kind) {
    case KernelKind::forward: return {"kernels/f32/forward.cuh", "ForwardF32"};
    case KernelKind::backward_query: return {"kernels/f32/backward_query.cuh", "BackwardQueryF32"};
    case KernelKind::backward_key_value:
      return {"kernels/f32/backward_key_value.cuh", "BackwardKeyValueF32"};
    case KernelKind::backward_sinks:  // reads only fp32 LSE and Dterm
      return {"kernels/row_kernels.cuh", "SinkGradients"};
    case KernelKind::mask_blocks: return {"kernels/mask_blocks.cuh", "MaskBlocks"};
    default: break;
  }
  throw Error(
      ErrorCode::invalid_argument,
      std::string("dtype f32 runs the forward, the deterministic backward "
                  "(backward_query, backward_key_value), backward_sinks and mask_blocks; no ") +
          to_string(kind) + " kernel");
}

// 16-bit tensors: the family the tuning picks, the most specific first.
KindInfo info_of(const KernelSpec& spec, const TuningParams& t) {
  if (spec.dtype == DType::f32) return f32_info_of(spec.kind);
  const bool dims = t.split == WarpgroupSplit::dims, outputs = t.split == WarpgroupSplit::outputs;
  switch (spec.kind) {
    case KernelKind::forward:
      if (t.producer) return {"kernels/forward/wgmma_producer.cuh", "ForwardWgmmaProducer"};
      if (t.wgmma) return {"kernels/forward/wgmma.cuh", "ForwardWgmma"};
      return {"kernels/forward/mma_sync.cuh", "Forward"};
    case KernelKind::backward_query:
      if (dims) return {"kernels/backward_query/wgmma_split.cuh", "BackwardQueryWgmmaSplit"};
      if (t.producer)
        return {"kernels/backward_query/wgmma_producer.cuh", "BackwardQueryWgmmaProducer"};
      if (t.wgmma) return {"kernels/backward_query/wgmma.cuh", "BackwardQueryWgmma"};
      return {"kernels/backward_query/mma_sync.cuh", "BackwardQuery"};
    case KernelKind::backward_key_value:
      if (dims) return {"kernels/backward_key_value/wgmma_dims.cuh", "BackwardKeyValueWgmmaDims"};
      if (outputs)
        return {"kernels/backward_key_value/wgmma_split.cuh", "BackwardKeyValueWgmmaSplit"};
      if (t.producer)
        return {"kernels/backward_key_value/wgmma_producer.cuh", "BackwardKeyValueWgmmaProducer"};
      if (t.wgmma) return {"kernels/backward_key_value/wgmma.cuh", "BackwardKeyValueWgmma"};
      return {"kernels/backward_key_value/mma_sync.cuh", "BackwardKeyValue"};
    case KernelKind::backward_atomic:
      return {"kernels/backward_key_value/mma_sync.cuh", "BackwardAtomic"};
    case KernelKind::backward_prepare: return {"kernels/row_kernels.cuh", "BackwardPrepare"};
    case KernelKind::convert_grad_q: return {"kernels/row_kernels.cuh", "ConvertGradQ"};
    case KernelKind::forward_combine: return {"kernels/row_kernels.cuh", "CombineSplits"};
    case KernelKind::backward_sinks: return {"kernels/row_kernels.cuh", "SinkGradients"};
    case KernelKind::mask_blocks: return {"kernels/mask_blocks.cuh", "MaskBlocks"};
  }
  throw Error(ErrorCode::invalid_argument, "unknown kernel kind");
}

std::string entry_of(KernelKind kind) { return std::string("flashgen_") + to_string(kind); }

bool is_row_kernel(KernelKind kind) {
  return kind == KernelKind::backward_prepare || kind == KernelKind::convert_grad_q ||
         kind == KernelKind::forward_combine || kind == KernelKind::backward_sinks ||
         kind == KernelKind::mask_blocks;
}

}  // namespace flashgen
