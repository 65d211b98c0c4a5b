// The tensors of one attention problem for the commands: packed BSHD inputs
// filled with random non-zero values, outputs poisoned with NaN bytes, on
// the host or on the current CUDA device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/runtime/runtime.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cli {

struct Shape {
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 1, seq_kv = 1, dim_qk = 1, dim_v = 1;
  DType dtype = DType::bf16;
  bool causal = false;
};

// Bytes on the host or on the current CUDA device.
class Buffer {
 public:
  Buffer() = default;
  Buffer(MemoryKind memory, std::size_t bytes);
  void* data() const;
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host, std::size_t bytes, std::size_t offset);
  std::vector<unsigned char> download() const;
  void fill_bytes(unsigned char value);

 private:
  MemoryKind memory_ = MemoryKind::host;
  std::size_t bytes_ = 0;
  std::vector<unsigned char> host_;
  cuda::DeviceBuffer device_;
};

// Random values of one dtype, generated once and copied into every tensor
// from a different starting element (wrapping), so filling gigabytes of
// device memory costs uploads, not random numbers. Values are uniform in
// ±[1/64, 1]: never zero, so a kernel that skips work cannot look right.
class RandomPool {
 public:
  RandomPool(DType dtype, std::size_t elements, std::uint64_t seed);
  void fill(Buffer& buffer, std::uint64_t start_element) const;
  DType dtype() const { return dtype_; }

 private:
  DType dtype_;
  std::vector<unsigned char> bytes_;  // [elements] of dtype_
};

class Workload {
 public:
  // `seed` picks where in the pool each input starts.
  Workload(const Shape& shape, MemoryKind memory, const RandomPool& pool, std::uint64_t seed);

  // Outputs hold NaN bytes until written; poison_gradients() restores that
  // for dQ, dK, dV before another backward is checked.
  void poison_gradients();

  ForwardArgs forward_args() const;
  BackwardArgs backward_args() const;
  const Shape& shape() const { return shape_; }
  MemoryKind memory() const { return memory_; }

  Buffer q, k, v, grad_o;            // inputs, [batch, seq, heads, dim]
  Buffer o, grad_q, grad_k, grad_v;  // outputs (o is the backward's input)
  Buffer lse;                        // fp32 [batch, heads_q, seq_q]

 private:
  TensorView view(const Buffer& b, std::int64_t seq, std::int64_t heads, std::int64_t dim) const;
  Shape shape_;
  MemoryKind memory_;
};

// The largest tensor of a shape, in elements (sizes a RandomPool).
std::size_t largest_tensor_elements(const Shape& shape);

}  // namespace flashgen::cli
