#include "cpu/sink_gradient.hpp"

#include <cmath>

#include "cpu/thread_pool.hpp"

namespace flashgen::cpu {

void write_sink_gradient(const Problem& p, const RowStatsView& lse,
                         const std::vector<float>& dterm, int threads) {
  const Strides3 s = strides_of(lse);
  parallel_for(p.heads_q, threads, [&](std::int64_t head) {
    const double sink = p.sink(head);
    double gradient = 0.0;
    for (std::int64_t b = 0; b < p.batch; ++b) {
      for (std::int64_t i = 0; i < p.seq_q; ++i) {
        const double row_lse = lse.data[b * s.batch + head * s.heads + i * s.seq];
        const double d = dterm[(b * p.heads_q + head) * p.seq_q + i];
        gradient -= std::exp(sink - row_lse) * d;
      }
    }
    p.grad_sinks.data[head * p.grad_sinks.stride[0]] = static_cast<float>(gradient);
  });
}

}  // namespace flashgen::cpu
