// Timing of library calls: CUDA events on the default stream for device
// tensors (cuda::time_ms), steady_clock for host tensors. Always the median:
// one descheduled repeat must not move the result.
#pragma once

#include <functional>
#include <vector>

#include "flashgen/flashgen.hpp"

namespace flashgen::cli {

// A call's median time (ms) and, on device tensors, the median microseconds
// the calling thread spends in it without waiting for the GPU (its launches
// queued): the library's host overhead per call. Host tensors: host_us -1
// (their calls are all host).
struct CallTimes {
  double ms = -1, host_us = -1;
};

// `body` makes one call; `warmup` untimed calls precede `repeats` timed ones.
CallTimes median_times(MemoryKind memory, const std::function<void()>& body, int warmup,
                       int repeats);
double median_ms(MemoryKind memory, const std::function<void()>& body, int warmup, int repeats);

// One call, timed from the host including compilation and synchronization
// (the cost a first call pays).
double first_call_ms(MemoryKind memory, const std::function<void()>& body);

double median(std::vector<double> values);

}  // namespace flashgen::cli
