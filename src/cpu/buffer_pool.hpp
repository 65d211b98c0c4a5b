// The CPU backend's large per-call buffers (converted K/V/Q/dO blocks, dQ's
// shares), kept for the next call instead of handed back to the OS.
//
// Why: buffers this large are mapped fresh by malloc on every call, and
// their first touch costs a page fault and a page clear per 4 KiB: 6-7% of a
// forward plus backward at D = 256, N = 2048 (one thread). Memory is kept
// up to a limit in all (512 MiB, or FLASHGEN_CPU_BUFFER_POOL_MB; 0 keeps
// nothing); a free buffer past it is returned at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace flashgen::cpu {

inline constexpr std::size_t kRetainedBytes = std::size_t{512} << 20;  // the default limit
inline constexpr const char* kBufferPoolEnvironmentVariable = "FLASHGEN_CPU_BUFFER_POOL_MB";

// The limit `setting` (the variable's value, or null) asks for: whole MiB,
// kRetainedBytes when unset or not a whole number.
std::size_t retained_limit_from(const char* setting);

struct PooledRelease {
  std::size_t bytes = 0;
  void operator()(void* p) const;
};
using PooledBuffer = std::unique_ptr<void, PooledRelease>;

// At least `bytes` of uninitialized memory, 64-byte aligned: a kept buffer
// large enough (the smallest such), or a new one. Thread-safe.
PooledBuffer pooled_buffer(std::size_t bytes);

// Bytes the pool holds for reuse now (tests).
std::size_t pooled_bytes_retained();

}  // namespace flashgen::cpu
