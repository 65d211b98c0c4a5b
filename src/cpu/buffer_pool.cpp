#include "cpu/buffer_pool.hpp"

#include <pthread.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace flashgen::cpu {
namespace {

struct Kept {
  void* data;
  std::size_t bytes;
};

struct Pool {
  std::mutex mutex;
  std::vector<Kept> kept;
  std::size_t retained = 0;
};

// Never destroyed: a buffer may be released while static destructors run.
Pool& pool() {
  static Pool* const instance = [] {
    auto* p = new Pool;
    // A fork while another thread holds the mutex would leave it held in the
    // child: the fork waits for it, and both sides release it.
    pthread_atfork([] { pool().mutex.lock(); }, [] { pool().mutex.unlock(); },
                   [] { pool().mutex.unlock(); });
    return p;
  }();
  return *instance;
}

constexpr std::size_t kAlignment = 64;

std::size_t retained_limit() {
  static const std::size_t limit = retained_limit_from(std::getenv(kBufferPoolEnvironmentVariable));
  return limit;
}

}  // namespace

std::size_t retained_limit_from(const char* setting) {
  if (setting == nullptr || *setting == '\0') return kRetainedBytes;
  char* end = nullptr;
  const unsigned long long mib = std::strtoull(setting, &end, 10);
  if (*end != '\0' || *setting == '-' || mib > (std::size_t{1} << 40)) return kRetainedBytes;
  return static_cast<std::size_t>(mib) << 20;
}

void PooledRelease::operator()(void* p) const {
  if (p == nullptr) return;
  Pool& s = pool();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.retained + bytes <= retained_limit()) {
      s.kept.push_back({p, bytes});
      s.retained += bytes;
      return;
    }
  }
  std::free(p);
}

PooledBuffer pooled_buffer(std::size_t bytes) {
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) return PooledBuffer(nullptr, PooledRelease{0});
  Pool& s = pool();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    std::size_t best = s.kept.size();
    for (std::size_t i = 0; i < s.kept.size(); ++i) {
      if (s.kept[i].bytes >= rounded &&
          (best == s.kept.size() || s.kept[i].bytes < s.kept[best].bytes)) {
        best = i;
      }
    }
    if (best != s.kept.size()) {
      const Kept found = s.kept[best];
      s.kept[best] = s.kept.back();
      s.kept.pop_back();
      s.retained -= found.bytes;
      return PooledBuffer(found.data, PooledRelease{found.bytes});
    }
  }
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return PooledBuffer(p, PooledRelease{rounded});
}

std::size_t pooled_bytes_retained() {
  Pool& s = pool();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.retained;
}

}  // namespace flashgen::cpu
