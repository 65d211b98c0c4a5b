#include "api/empty_outputs.hpp"

#include <cstring>
#include <limits>

namespace flashgen::api {

void fill_zero(const TensorView& t) {
  if (t.numel() == 0) return;
  const std::size_t element = size_of(t.dtype);
  auto* base = static_cast<unsigned char*>(t.data);
  for (std::int64_t b = 0; b < t.shape[0]; ++b)
    for (std::int64_t s = 0; s < t.shape[1]; ++s)
      for (std::int64_t h = 0; h < t.shape[2]; ++h) {
        unsigned char* row =
            base + (b * t.stride[0] + s * t.stride[1] + h * t.stride[2]) * element;  // [dim]
        if (t.stride[3] == 1) {
          std::memset(row, 0, t.shape[3] * element);
          continue;
        }
        for (std::int64_t d = 0; d < t.shape[3]; ++d)
          std::memset(row + d * t.stride[3] * element, 0, element);
      }
}

namespace {

// Every row's log-sum-exp of a row that sees no key: -inf, or the head's
// sink logit (the softmax then holds the sink alone).
void fill_row_stats(const Problem& p, const RowStatsView& t) {
  if (t.data == nullptr) return;
  for (std::int64_t b = 0; b < t.shape[0]; ++b)
    for (std::int64_t h = 0; h < t.shape[1]; ++h) {
      const float value = p.has_sinks() ? static_cast<float>(p.sink(h))
                                        : -std::numeric_limits<float>::infinity();
      for (std::int64_t s = 0; s < t.shape[2]; ++s)
        t.data[b * t.stride[0] + h * t.stride[1] + s * t.stride[2]] = value;
    }
}

}  // namespace

void write_empty_forward(const Problem& p, const ForwardArgs& args) {
  if (p.seq_q == 0) return;  // o and lse have no elements
  // seq_kv == 0: every query row attends to nothing.
  fill_zero(args.o);
  fill_row_stats(p, args.lse);
}

void write_empty_backward(const Problem& p, const BackwardArgs& args) {
  // Whichever gradient has elements is zero: no (query, key) pair
  // contributes, and O = 0 gives the sinks no gradient either.
  fill_zero(args.grad_q);
  fill_zero(args.grad_k);
  fill_zero(args.grad_v);
  if (p.has_sinks()) {
    for (std::int64_t h = 0; h < p.heads_q; ++h) p.grad_sinks.data[h * p.grad_sinks.stride[0]] = 0.0f;
  }
}

}  // namespace flashgen::api
