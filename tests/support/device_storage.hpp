// Byte storage for test tensors on the host or on a CUDA device, so one test
// harness serves every backend.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "flashgen/flashgen.hpp"

namespace flashgen::testing {

class Storage {
 public:
  virtual ~Storage() = default;
  virtual void* data() = 0;  // host or device address
  virtual std::size_t bytes() const = 0;
  virtual void upload(const void* host, std::size_t bytes) = 0;  // whole buffer from host
  virtual void download(void* host, std::size_t bytes) const = 0;
};

// Where a storage's bytes lie.
enum class Placement {
  // Host: plain memory; cuda: a cuMemAlloc buffer on the current device
  // (throws flashgen::Error(unsupported) where there is no GPU).
  plain,
  // The storage's last byte is the last byte of a mapped range, and the
  // page after it is not mapped, so a read or write past the end faults in
  // an ordinary run (host: mmap with a PROT_NONE page after it; cuda: the
  // driver's virtual memory API, a reserved range whose last granule is
  // left unmapped).
  ends_at_unmapped_page,
};

std::unique_ptr<Storage> make_storage(MemoryKind memory, std::size_t bytes,
                                      Placement placement = Placement::plain);

// A storage in `memory` holding `values` (one byte at least, so that no
// values still have an address).
template <class T>
std::unique_ptr<Storage> stored(const std::vector<T>& values, MemoryKind memory) {
  const std::size_t bytes = sizeof(T) * values.size();
  std::unique_ptr<Storage> s = make_storage(memory, bytes > 0 ? bytes : 1);
  if (bytes > 0) s->upload(values.data(), bytes);
  return s;
}

// Whether GPU tests can run here; when not, the reason for GTEST_SKIP.
bool gpu_available(std::string* reason);

// First statement of a GPU test: reports SKIPPED, with the reason, where no
// GPU can run kernels.
#define FLASHGEN_SKIP_WITHOUT_GPU()                                    \
  do {                                                                 \
    std::string reason;                                                \
    if (!::flashgen::testing::gpu_available(&reason))                  \
      GTEST_SKIP() << "no GPU: " << reason;                            \
  } while (0)

}  // namespace flashgen::testing
