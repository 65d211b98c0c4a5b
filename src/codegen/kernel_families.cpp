#include "codegen/kernel_families.hpp"

#include <string>

#include "flashgen/flashgen.hpp"

namespace flashgen {

// fp32 tensors: the CUDA-core kernels of the deterministic backward and
// the forward (kernels/f32/).
KindInfo f32_info_of(KernelKind kind) {
  switch (kind) {
    case KernelKind::forward: return {"kernels/f32/forward.cuh", "ForwardF32", "flashgen_forward"};
    case KernelKind::backward_query:
      return {"kernels/f32/backward_query.cuh", "BackwardQueryF32", "flashgen_backward_query"};
    case KernelKind::backward_key_value:
      return {"kernels/f32/backward_key_value.cuh", "BackwardKeyValueF32", "flashgen_backward_key_value"};
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
        return {"kernels/forward/wgmma_producer.cuh", "ForwardWgmmaProducer", "flashgen_forward"};
      if (t.wgmma) return {"kernels/forward/wgmma.cuh", "ForwardWgmma", "flashgen_forward"};
      return {"kernels/forward/mma_sync.cuh", "Forward", "flashgen_forward"};
    case KernelKind::backward_query:
      if (t.split == WarpgroupSplit::dims)
        return {"kernels/backward_query/wgmma_split.cuh", "BackwardQueryWgmmaSplit",
                "flashgen_backward_query"};
      if (t.producer)
        return {"kernels/backward_query/wgmma_producer.cuh", "BackwardQueryWgmmaProducer",
                "flashgen_backward_query"};
      if (t.wgmma) return {"kernels/backward_query/wgmma.cuh", "BackwardQueryWgmma", "flashgen_backward_query"};
      return {"kernels/backward_query/mma_sync.cuh", "BackwardQuery", "flashgen_backward_query"};
    case KernelKind::backward_key_value:
      if (t.split == WarpgroupSplit::dims)
        return {"kernels/backward_key_value/wgmma_dims.cuh", "BackwardKeyValueWgmmaDims",
                "flashgen_backward_key_value"};
      if (t.split == WarpgroupSplit::outputs)
        return {"kernels/backward_key_value/wgmma_split.cuh", "BackwardKeyValueWgmmaSplit",
                "flashgen_backward_key_value"};
      if (t.producer)
        return {"kernels/backward_key_value/wgmma_producer.cuh", "BackwardKeyValueWgmmaProducer",
                "flashgen_backward_key_value"};
      if (t.wgmma)
        return {"kernels/backward_key_value/wgmma.cuh", "BackwardKeyValueWgmma",
                "flashgen_backward_key_value"};
      return {"kernels/backward_key_value/mma_sync.cuh", "BackwardKeyValue", "flashgen_backward_key_value"};
    case KernelKind::backward_atomic:
      return {"kernels/backward_key_value/mma_sync.cuh", "BackwardAtomic", "flashgen_backward_atomic"};
    case KernelKind::backward_prepare:
      return {"kernels/row_kernels.cuh", "BackwardPrepare", "flashgen_backward_prepare"};
    case KernelKind::convert_grad_q:
      return {"kernels/row_kernels.cuh", "ConvertGradQ", "flashgen_convert_grad_q"};
  }
  throw Error(ErrorCode::invalid_argument, "unknown kernel kind");
}

bool is_row_kernel(KernelKind kind) {
  return kind == KernelKind::backward_prepare || kind == KernelKind::convert_grad_q;
}


}  // namespace flashgen
