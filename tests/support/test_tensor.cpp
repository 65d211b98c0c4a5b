#include "test_tensor.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <numbers>

#include "common/dtype.hpp"

namespace flashgen::testing {
namespace {

unsigned char guard_byte(std::size_t position) {
  // Position-dependent, so a write of the right bytes at a shifted place is
  // caught too.
  constexpr unsigned kStart = 0x5a, kStep = 37;
  return static_cast<unsigned char>(kStart + kStep * position);
}

// splitmix64: a tiny, well-mixed generator whose sequence is the same with
// every compiler and standard library.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1].
  double uniform() {
    constexpr int kMantissaBits = 53;
    return static_cast<double>((next() >> (64 - kMantissaBits)) + 1) * 0x1p-53;
  }
};

// Standard normal by Box-Muller.
double normal(SplitMix64& rng) {
  const double radius = std::sqrt(-2.0 * std::log(rng.uniform()));
  return radius * std::cos(2.0 * std::numbers::pi * rng.uniform());
}

}  // namespace

const char* to_string(Layout layout) {
  switch (layout) {
    case Layout::bshd: return "bshd";
    case Layout::bhsd: return "bhsd";
    case Layout::padded: return "padded";
  }
  return "unknown-layout";
}

std::uint64_t seed_from(const std::string& name) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : name) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

namespace {

// Element strides of [batch, seq, heads, dim] in each layout.
std::array<std::int64_t, 4> layout_strides(Layout layout, std::int64_t seq, std::int64_t heads,
                                          std::int64_t dim) {
  switch (layout) {
    case Layout::bshd: break;
    case Layout::bhsd: return {heads * seq * dim, dim, seq * dim, 1};
    case Layout::padded: {
      const std::int64_t row = dim + kPaddedRowExtra;
      return {seq * heads * row, heads * row, row, 1};
    }
  }
  return {seq * heads * dim, heads * dim, dim, 1};
}

}  // namespace

TestTensor::TestTensor(MemoryKind memory, DType dtype, std::int64_t batch, std::int64_t seq,
                       std::int64_t heads, std::int64_t dim, Layout layout, Placement placement)
    : TestTensor(memory, dtype, 4, {batch, seq, heads, dim},
                 layout_strides(layout, seq, heads, dim), placement) {}

TestTensor TestTensor::row_stats(MemoryKind memory, std::int64_t batch, std::int64_t heads,
                                 std::int64_t seq, Placement placement) {
  return TestTensor(memory, DType::f32, 3, {batch, heads, seq, 1}, {heads * seq, seq, 1, 0},
                    placement);
}

TestTensor::TestTensor(MemoryKind memory, DType dtype, int rank,
                       const std::array<std::int64_t, 4>& shape,
                       const std::array<std::int64_t, 4>& stride, Placement placement)
    : memory_(memory),
      dtype_(dtype),
      rank_(rank),
      element_bytes_(size_of(dtype)),
      trailing_guard_(placement == Placement::ends_at_unmapped_page ? 0 : kGuardBytes) {
  std::int64_t extent = 1;  // elements from the first to the last, inclusive
  std::int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    shape_[i] = shape[i];
    stride_[i] = stride[i];
    extent += (shape[i] - 1) * stride[i];
    count *= shape[i];
  }
  if (count == 0) extent = 0;
  const std::size_t bytes =
      kGuardBytes + static_cast<std::size_t>(extent) * element_bytes_ + trailing_guard_;
  storage_ = make_storage(memory, bytes, placement);
  is_element_byte_.assign(bytes, false);
  element_offsets_.reserve(static_cast<std::size_t>(count));
  // Packed index order: the last axis fastest.
  std::int64_t index[4] = {0, 0, 0, 0};
  for (std::int64_t e = 0; e < count; ++e) {
    std::int64_t offset = 0;
    for (int i = 0; i < rank; ++i) offset += index[i] * stride_[i];
    const std::size_t byte = kGuardBytes + static_cast<std::size_t>(offset) * element_bytes_;
    element_offsets_.push_back(byte);
    for (std::size_t b = 0; b < element_bytes_; ++b) is_element_byte_[byte + b] = true;
    for (int i = rank - 1; i >= 0 && ++index[i] == shape_[i]; --i) index[i] = 0;
  }
  image_.resize(bytes);
  for (std::size_t i = 0; i < bytes; ++i) image_[i] = guard_byte(i);
}

TensorView TestTensor::view() const {
  TensorView t;
  t.data = static_cast<unsigned char*>(storage_->data()) + kGuardBytes;
  t.dtype = dtype_;
  for (int i = 0; i < 4; ++i) t.shape[i] = shape_[i], t.stride[i] = stride_[i];
  t.memory = memory_;
  t.device = 0;
  return t;
}

RowStatsView TestTensor::stats_view() const {
  RowStatsView t;
  t.data = reinterpret_cast<float*>(static_cast<unsigned char*>(storage_->data()) + kGuardBytes);
  for (int i = 0; i < 3; ++i) t.shape[i] = shape_[i], t.stride[i] = stride_[i];
  t.memory = memory_;
  t.device = 0;
  return t;
}

void TestTensor::upload_image() { storage_->upload(image_.data(), image_.size()); }

void TestTensor::fill_random(std::uint64_t seed) {
  SplitMix64 rng{seed};
  for (std::size_t byte : element_offsets_) {
    store_from_float(image_.data() + byte, dtype_, 0, static_cast<float>(normal(rng)));
  }
  upload_image();
}

void TestTensor::poison() {
  for (std::size_t byte : element_offsets_) {
    unsigned char* at = image_.data() + byte;
    switch (dtype_) {
      case DType::f32: std::memcpy(at, &kPoisonF32, sizeof kPoisonF32); break;
      case DType::bf16: std::memcpy(at, &kPoisonBf16, sizeof kPoisonBf16); break;
      case DType::f16: std::memcpy(at, &kPoisonF16, sizeof kPoisonF16); break;
      case DType::e4m3: std::memcpy(at, &kPoisonE4m3, sizeof kPoisonE4m3); break;
    }
  }
  upload_image();
}

void TestTensor::fill_head(std::int64_t head, float value) {
  for (std::size_t i = 0; i < element_offsets_.size(); ++i)
    if ((static_cast<std::int64_t>(i) / shape_[3]) % shape_[2] == head)
      store_from_float(image_.data() + element_offsets_[i], dtype_, 0, value);
  upload_image();
}

void TestTensor::fill_rows(std::int64_t first, std::int64_t end, float value) {
  for (std::size_t i = 0; i < element_offsets_.size(); ++i) {
    const std::int64_t row = static_cast<std::int64_t>(i) / (shape_[3] * shape_[2]) % shape_[1];
    if (row >= first && row < end)
      store_from_float(image_.data() + element_offsets_[i], dtype_, 0, value);
  }
  upload_image();
}

void TestTensor::snapshot() { image_ = download(); }

std::vector<unsigned char> TestTensor::download() const {
  std::vector<unsigned char> now(image_.size());
  storage_->download(now.data(), now.size());
  return now;
}

std::string TestTensor::describe_byte(std::size_t byte) const {
  if (byte < kGuardBytes) return "the guard band before the tensor (byte " +
                                 std::to_string(kGuardBytes - byte) + " before it)";
  if (byte >= image_.size() - trailing_guard_) {
    return "the guard band after the tensor (byte " +
           std::to_string(byte - (image_.size() - trailing_guard_)) + " after it)";
  }
  if (!is_element_byte_[byte]) return "a gap between rows (byte " + std::to_string(byte) + ")";
  for (std::size_t e = 0; e < element_offsets_.size(); ++e) {
    if (byte >= element_offsets_[e] && byte < element_offsets_[e] + element_bytes_) {
      return "element " + index_text(static_cast<std::int64_t>(e));
    }
  }
  return "byte " + std::to_string(byte);
}

std::string TestTensor::check_unchanged(const std::vector<unsigned char>& now) const {
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (now[i] != image_[i]) return "was modified at " + describe_byte(i);
  }
  return "";
}

std::string TestTensor::check_outside_unchanged(const std::vector<unsigned char>& now) const {
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (!is_element_byte_[i] && now[i] != image_[i]) return "was written at " + describe_byte(i);
  }
  return "";
}

std::string TestTensor::check_all_written(const std::vector<unsigned char>& now) const {
  std::int64_t unwritten = 0, first = -1;
  for (std::size_t e = 0; e < element_offsets_.size(); ++e) {
    const std::size_t at = element_offsets_[e];
    if (std::memcmp(now.data() + at, image_.data() + at, element_bytes_) == 0) {
      if (first < 0) first = static_cast<std::int64_t>(e);
      ++unwritten;
    }
  }
  if (unwritten == 0) return "";
  return std::to_string(unwritten) + " of " + std::to_string(numel()) +
         " elements still hold the poison pattern (first at " + index_text(first) + ")";
}

std::vector<double> TestTensor::values(const std::vector<unsigned char>& now) const {
  std::vector<double> out(element_offsets_.size());
  for (std::size_t e = 0; e < out.size(); ++e) {
    out[e] = load_as_float(now.data() + element_offsets_[e], dtype_, 0);
  }
  return out;
}

TensorView TestTensor::host_view(std::vector<unsigned char>& now) const {
  TensorView t = view();
  t.data = now.data() + kGuardBytes;
  t.memory = MemoryKind::host;
  return t;
}

std::string TestTensor::index_text(std::int64_t i) const {
  std::int64_t index[4] = {0, 0, 0, 0};
  for (int axis = rank_ - 1; axis >= 0; --axis) {
    index[axis] = i % shape_[axis];
    i /= shape_[axis];
  }
  std::string text = "[";
  for (int axis = 0; axis < rank_; ++axis) {
    text += (axis ? ", " : "") + std::to_string(index[axis]);
  }
  return text + "]";
}

}  // namespace flashgen::testing
