#include "timing.hpp"

#include <algorithm>
#include <chrono>

#include "cuda/runtime/runtime.hpp"

namespace flashgen::cli {

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

double first_call_ms(MemoryKind memory, const std::function<void()>& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  if (memory == MemoryKind::cuda) cuda::synchronize();
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(stop - start).count();
}

CallTimes median_times(MemoryKind memory, const std::function<void()>& body, int warmup,
                       int repeats) {
  CallTimes t;
  if (memory == MemoryKind::cuda) {
    // The host time of each timed call, taken around the call inside the
    // timed loop: its launches are queued, not waited for, and the GPU does
    // no work beyond the timed calls' own.
    std::vector<double> host;
    int calls = 0;
    const cuda::StreamHandle default_stream = nullptr;
    auto host_timed = [&] {
      const auto start = std::chrono::steady_clock::now();
      body();
      const auto stop = std::chrono::steady_clock::now();
      if (calls++ >= warmup)
        host.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    };
    t.ms = median(cuda::time_ms(host_timed, default_stream, warmup, repeats));
    t.host_us = median(host);
    return t;
  }
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) times.push_back(first_call_ms(memory, body));
  t.ms = median(times);
  return t;
}

double median_ms(MemoryKind memory, const std::function<void()>& body, int warmup, int repeats) {
  return median_times(memory, body, warmup, repeats).ms;
}

}  // namespace flashgen::cli
