// Timing of library calls: CUDA events on the default stream for device
// tensors (cuda::time_ms), steady_clock for host tensors. Always the median:
// one descheduled repeat must not move the result.
#pragma once

#include <functional>
#include <vector>

#include "flashgen/flashgen.hpp"

namespace flashgen::cli {

// `body` makes one call; `warmup` untimed calls precede `repeats` timed ones.
double median_ms(MemoryKind memory, const std::function<void()>& body, int warmup, int repeats);

// One call, timed from the host including compilation and synchronization
// (the cost a first call pays).
double first_call_ms(MemoryKind memory, const std::function<void()>& body);

// Median microseconds the calling thread spends in one call of `body` on
// device tensors, without waiting for the GPU (the launches are queued): the
// library's host overhead per call. Host tensors: 0 (their calls are all host).
double median_host_us(MemoryKind memory, const std::function<void()>& body, int calls);

double median(std::vector<double> values);

}  // namespace flashgen::cli
