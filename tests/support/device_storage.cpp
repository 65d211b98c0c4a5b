#include "device_storage.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "cuda/runtime/runtime.hpp"

namespace flashgen::testing {
namespace {

class HostStorage final : public Storage {
 public:
  explicit HostStorage(std::size_t bytes) : bytes_(bytes) {}
  void* data() override { return bytes_.data(); }
  std::size_t bytes() const override { return bytes_.size(); }
  void upload(const void* host, std::size_t n) override { std::memcpy(bytes_.data(), host, n); }
  void download(void* host, std::size_t n) const override { std::memcpy(host, bytes_.data(), n); }

 private:
  std::vector<unsigned char> bytes_;
};

class CudaStorage final : public Storage {
 public:
  explicit CudaStorage(std::size_t bytes) : buffer_(bytes) {}
  void* data() override { return buffer_.data(); }
  std::size_t bytes() const override { return buffer_.bytes(); }
  void upload(const void* host, std::size_t n) override { buffer_.upload(host, n); }
  void download(void* host, std::size_t n) const override { buffer_.download(host, n); }

 private:
  cuda::DeviceBuffer buffer_;
};

}  // namespace

std::unique_ptr<Storage> make_storage(MemoryKind memory, std::size_t bytes) {
  if (memory == MemoryKind::cuda) return std::make_unique<CudaStorage>(bytes);
  return std::make_unique<HostStorage>(bytes);
}

bool gpu_available(std::string* reason) {
  cuda::Availability a = cuda::availability();
  if (!a.ok && reason) *reason = a.reason;
  return a.ok;
}

}  // namespace flashgen::testing
