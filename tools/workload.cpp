#include "workload.hpp"

#include <algorithm>
#include <cstring>

#include "common/dtype.hpp"

namespace flashgen::cli {
namespace {

// NaN in every dtype (f32 0xffffffff, bf16/f16 0xffff): an output element
// the library forgets to write fails the check.
constexpr unsigned char kPoisonByte = 0xff;
// Magnitudes of random inputs: [kSmallest, 1], either sign.
constexpr float kSmallest = 1.0f / 64.0f;

// splitmix64: fast, and good enough for test values.
std::uint64_t next_random(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::size_t bytes_of(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d, DType t) {
  return static_cast<std::size_t>(b * s * h * d) * size_of(t);
}

}  // namespace

Buffer::Buffer(MemoryKind memory, std::size_t bytes) : memory_(memory), bytes_(bytes) {
  if (memory == MemoryKind::cuda) {
    if (bytes > 0) device_ = cuda::DeviceBuffer(bytes);
  } else {
    host_.resize(bytes);
  }
}

void* Buffer::data() const {
  if (bytes_ == 0) return nullptr;
  if (memory_ == MemoryKind::cuda) return device_.data();
  return const_cast<unsigned char*>(host_.data());
}

void Buffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  if (bytes == 0) return;
  if (memory_ == MemoryKind::cuda)
    device_.upload(host, bytes, offset);
  else
    std::memcpy(host_.data() + offset, host, bytes);
}

std::vector<unsigned char> Buffer::download() const {
  if (memory_ == MemoryKind::host) return host_;
  std::vector<unsigned char> out(bytes_);
  if (bytes_ > 0) device_.download(out.data(), bytes_);
  return out;
}

void Buffer::fill_bytes(unsigned char value) {
  if (bytes_ == 0) return;
  if (memory_ == MemoryKind::cuda)
    device_.fill_bytes(value);
  else
    std::memset(host_.data(), value, bytes_);
}

RandomPool::RandomPool(DType dtype, std::size_t elements, std::uint64_t seed) : dtype_(dtype) {
  elements = std::max<std::size_t>(elements, 1);
  bytes_.resize(elements * size_of(dtype));
  std::uint64_t state = seed;
  constexpr double kUnit = 1.0 / 9007199254740992.0;  // 2^-53: 53 random bits -> [0, 1)
  for (std::size_t i = 0; i < elements; ++i) {
    const std::uint64_t bits = next_random(state);
    const double unit = static_cast<double>(bits >> 11) * kUnit;
    const float magnitude = kSmallest + static_cast<float>(unit) * (1.0f - kSmallest);
    const float value = (bits & 1u) ? -magnitude : magnitude;
    store_from_float(bytes_.data(), dtype, static_cast<std::int64_t>(i), value);
  }
}

void RandomPool::fill(Buffer& buffer, std::uint64_t start_element) const {
  const std::size_t element = size_of(dtype_);
  std::size_t position = (start_element % (bytes_.size() / element)) * element;
  std::size_t done = 0;
  while (done < buffer.bytes()) {
    const std::size_t chunk = std::min(bytes_.size() - position, buffer.bytes() - done);
    buffer.upload(bytes_.data() + position, chunk, done);
    done += chunk;
    position = 0;
  }
}

std::size_t largest_tensor_elements(const Shape& s) {
  const std::int64_t q = s.batch * s.seq_q * s.heads_q * std::max(s.dim_qk, s.dim_v);
  const std::int64_t kv = s.batch * s.seq_kv * s.heads_kv * std::max(s.dim_qk, s.dim_v);
  return static_cast<std::size_t>(std::max(q, kv));
}

Workload::Workload(const Shape& s, MemoryKind memory, const RandomPool& pool, std::uint64_t seed)
    : shape_(s), memory_(memory) {
  q = Buffer(memory, bytes_of(s.batch, s.seq_q, s.heads_q, s.dim_qk, s.dtype));
  k = Buffer(memory, bytes_of(s.batch, s.seq_kv, s.heads_kv, s.dim_qk, s.dtype));
  v = Buffer(memory, bytes_of(s.batch, s.seq_kv, s.heads_kv, s.dim_v, s.dtype));
  grad_o = Buffer(memory, bytes_of(s.batch, s.seq_q, s.heads_q, s.dim_v, s.dtype));
  o = Buffer(memory, grad_o.bytes());
  grad_q = Buffer(memory, q.bytes());
  grad_k = Buffer(memory, k.bytes());
  grad_v = Buffer(memory, v.bytes());
  lse = Buffer(memory, static_cast<std::size_t>(s.batch * s.heads_q * s.seq_q) * sizeof(float));

  // Different starting points: q, k, v and grad_o never hold the same values.
  std::uint64_t state = seed;
  for (Buffer* input : {&q, &k, &v, &grad_o}) pool.fill(*input, next_random(state));
  for (Buffer* output : {&o, &grad_q, &grad_k, &grad_v, &lse}) output->fill_bytes(kPoisonByte);
}

void Workload::poison_gradients() {
  for (Buffer* gradient : {&grad_q, &grad_k, &grad_v}) gradient->fill_bytes(kPoisonByte);
}

TensorView Workload::view(const Buffer& b, std::int64_t seq, std::int64_t heads,
                          std::int64_t dim) const {
  const int device = memory_ == MemoryKind::cuda ? cuda::current_device() : 0;
  return TensorView::bshd(b.data(), shape_.dtype, shape_.batch, seq, heads, dim, memory_, device);
}

ForwardArgs Workload::forward_args() const {
  const Shape& s = shape_;
  ForwardArgs a;
  a.q = view(q, s.seq_q, s.heads_q, s.dim_qk);
  a.k = view(k, s.seq_kv, s.heads_kv, s.dim_qk);
  a.v = view(v, s.seq_kv, s.heads_kv, s.dim_v);
  a.o = view(o, s.seq_q, s.heads_q, s.dim_v);
  a.lse = RowStatsView::contiguous(static_cast<float*>(lse.data()), s.batch, s.heads_q, s.seq_q,
                                   memory_, a.q.device);
  return a;
}

BackwardArgs Workload::backward_args() const {
  const Shape& s = shape_;
  const ForwardArgs f = forward_args();
  BackwardArgs a;
  a.q = f.q;
  a.k = f.k;
  a.v = f.v;
  a.o = f.o;
  a.lse = f.lse;
  a.grad_o = view(grad_o, s.seq_q, s.heads_q, s.dim_v);
  a.grad_q = view(grad_q, s.seq_q, s.heads_q, s.dim_qk);
  a.grad_k = view(grad_k, s.seq_kv, s.heads_kv, s.dim_qk);
  a.grad_v = view(grad_v, s.seq_kv, s.heads_kv, s.dim_v);
  return a;
}

}  // namespace flashgen::cli
