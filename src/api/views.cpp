// Constructors of the public tensor views and the names of the public enums.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

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
    case DType::e4m3: return "e4m3";
  }
  return "unknown-dtype";
}

std::size_t size_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::f32: return 4;
    case DType::e4m3: return 1;
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

const char* to_string(CausalAlignment alignment) {
  switch (alignment) {
    case CausalAlignment::bottom_right: return "bottom_right";
    case CausalAlignment::top_left: return "top_left";
  }
  return "unknown-alignment";
}

namespace {

// A [batch, seq, heads, dim] view with the given element strides.
TensorView view_with_strides(void* data, DType dtype, const std::int64_t (&shape)[4],
                             const std::int64_t (&stride)[4], MemoryKind memory, int device) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  for (int d = 0; d < 4; ++d) {
    t.shape[d] = shape[d];
    t.stride[d] = stride[d];
  }
  t.memory = memory;
  t.device = device;
  return t;
}

}  // namespace

TensorView TensorView::bshd(void* data, DType dtype, std::int64_t batch, std::int64_t seq,
                            std::int64_t heads, std::int64_t dim, MemoryKind memory, int device) {
  // Memory order: batch, seq, heads, dim (dim fastest).
  return view_with_strides(data, dtype, {batch, seq, heads, dim},
                           {seq * heads * dim, heads * dim, dim, 1}, memory, device);
}

TensorView TensorView::bhsd(void* data, DType dtype, std::int64_t batch, std::int64_t seq,
                            std::int64_t heads, std::int64_t dim, MemoryKind memory, int device) {
  // Memory order: batch, heads, seq, dim; the view's axes stay [batch, seq, heads, dim].
  return view_with_strides(data, dtype, {batch, seq, heads, dim},
                           {heads * seq * dim, dim, seq * dim, 1}, memory, device);
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

HeadVectorView HeadVectorView::heads(float* data, std::int64_t heads_q, MemoryKind memory,
                                     int device) {
  HeadVectorView t;
  t.data = data;
  t.rank = 1;
  t.shape[0] = heads_q;
  t.stride[0] = 1;
  t.memory = memory;
  t.device = device;
  return t;
}

HeadVectorView HeadVectorView::batch_heads(float* data, std::int64_t batch, std::int64_t heads_q,
                                           MemoryKind memory, int device) {
  HeadVectorView t;
  t.data = data;
  t.rank = 2;
  t.shape[0] = batch;
  t.shape[1] = heads_q;
  t.stride[0] = heads_q;
  t.stride[1] = 1;
  t.memory = memory;
  t.device = device;
  return t;
}

namespace {

MaskTensorView mask_view(std::string name, const void* data, MaskElement element,
                         std::int64_t size, MemoryKind memory, int device) {
  MaskTensorView t;
  t.name = std::move(name);
  t.data = data;
  t.element = element;
  t.size = size;
  t.memory = memory;
  t.device = device;
  return t;
}

}  // namespace

MaskTensorView MaskTensorView::int32(std::string name, const std::int32_t* data,
                                     std::int64_t size, MemoryKind memory, int device) {
  return mask_view(std::move(name), data, MaskElement::int32, size, memory, device);
}

MaskTensorView MaskTensorView::float32(std::string name, const float* data, std::int64_t size,
                                       MemoryKind memory, int device) {
  return mask_view(std::move(name), data, MaskElement::float32, size, memory, device);
}

const char* version() { return FLASHGEN_VERSION; }

}  // namespace flashgen
