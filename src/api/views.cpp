// Constructors of the public tensor views and the names of the public enums.
#include <cstddef>
#include <cstdint>

#include "flashgen/flashgen.hpp"

#ifndef FLASHGEN_VERSION
#define FLASHGEN_VERSION "0.0.0"
#endif

namespace flashgen {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
  }
  return "unknown-dtype";
}

std::size_t size_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::f32: return 4;
  }
  return 0;  // not a DType; validation reports it by name
}

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::automatic: return "automatic";
    case Backend::cuda: return "cuda";
    case Backend::cpu: return "cpu";
  }
  return "unknown-backend";
}

TensorView TensorView::bshd(void* data, DType dtype, std::int64_t batch, std::int64_t seq,
                            std::int64_t heads, std::int64_t dim, MemoryKind memory, int device) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.shape[0] = batch;
  t.shape[1] = seq;
  t.shape[2] = heads;
  t.shape[3] = dim;
  // Memory order: batch, seq, heads, dim (dim fastest).
  t.stride[3] = 1;
  t.stride[2] = dim;
  t.stride[1] = heads * dim;
  t.stride[0] = seq * heads * dim;
  t.memory = memory;
  t.device = device;
  return t;
}

TensorView TensorView::bhsd(void* data, DType dtype, std::int64_t batch, std::int64_t seq,
                            std::int64_t heads, std::int64_t dim, MemoryKind memory, int device) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.shape[0] = batch;
  t.shape[1] = seq;
  t.shape[2] = heads;
  t.shape[3] = dim;
  // Memory order: batch, heads, seq, dim; the view's axes stay [batch, seq, heads, dim].
  t.stride[3] = 1;
  t.stride[1] = dim;
  t.stride[2] = seq * dim;
  t.stride[0] = heads * seq * dim;
  t.memory = memory;
  t.device = device;
  return t;
}

RowStatsView RowStatsView::contiguous(float* data, std::int64_t batch, std::int64_t heads,
                                      std::int64_t seq, MemoryKind memory, int device) {
  RowStatsView t;
  t.data = data;
  t.shape[0] = batch;
  t.shape[1] = heads;
  t.shape[2] = seq;
  t.stride[2] = 1;
  t.stride[1] = seq;
  t.stride[0] = heads * seq;
  t.memory = memory;
  t.device = device;
  return t;
}

const char* version() { return FLASHGEN_VERSION; }

}  // namespace flashgen
