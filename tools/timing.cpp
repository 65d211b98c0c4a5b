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

double median_ms(MemoryKind memory, const std::function<void()>& body, int warmup, int repeats) {
  if (memory == MemoryKind::cuda) {
    const cuda::StreamHandle default_stream = nullptr;
    return median(cuda::time_ms([&] { body(); }, default_stream, warmup, repeats));
  }
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) times.push_back(first_call_ms(memory, body));
  return median(times);
}

double median_host_us(MemoryKind memory, const std::function<void()>& body, int calls) {
  if (memory != MemoryKind::cuda) return 0.0;
  // Drained now and then, so a full launch queue never blocks a call.
  constexpr int kCallsBetweenDrains = 32;
  body();  // any first-call work (compilation) stays out
  cuda::synchronize();
  std::vector<double> times;
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    const auto stop = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    if ((i + 1) % kCallsBetweenDrains == 0) cuda::synchronize();
  }
  cuda::synchronize();
  return median(times);
}

}  // namespace flashgen::cli
