#include "cpu/reference_sequences.hpp"

#include <algorithm>

#include "common/dtype.hpp"
#include "cpu/kv_cache.hpp"

namespace flashgen::cpu {
namespace {

// Rows [begin, end) of a packed [1, rows, heads, dim] array.
std::vector<double> slice(const std::vector<double>& packed, std::int64_t row_elements,
                          std::int64_t begin, std::int64_t end) {
  return {packed.begin() + begin * row_elements, packed.begin() + end * row_elements};
}

void put(std::vector<double>& packed, std::int64_t row_elements, std::int64_t begin,
         const std::vector<double>& rows) {
  std::copy(rows.begin(), rows.end(), packed.begin() + begin * row_elements);
}

struct Sequence {
  Problem p;
  PackedInputs in;
  std::int64_t q0, k0;
};

Sequence sequence(const Problem& packed, const Sequences& s, const PackedInputs& in,
                  std::size_t b) {
  Sequence out{packed, {}, s.q_begin[b], s.k_begin[b]};
  const std::int64_t q1 = s.q_begin[b + 1], k1 = s.k_begin[b + 1];
  out.p.seq_q = q1 - out.q0;
  out.p.seq_kv = k1 - out.k0;
  out.p.mask_batch0 = static_cast<std::int64_t>(b);  // the user mask's b is the sequence
  out.p.alibi_slopes = slopes_of_row(packed.alibi_slopes, static_cast<std::int64_t>(b));
  out.in.q = slice(in.q, packed.heads_q * packed.dim_qk, out.q0, q1);
  out.in.k = slice(in.k, packed.heads_kv * packed.dim_qk, out.k0, k1);
  out.in.v = slice(in.v, packed.heads_kv * packed.dim_v, out.k0, k1);
  if (!in.grad_o.empty()) out.in.grad_o = slice(in.grad_o, packed.heads_q * packed.dim_v, out.q0, q1);
  return out;
}

void put_forward(const Problem& packed, const Sequence& s, const ForwardResult& from,
                 ForwardResult& to) {
  put(to.o, packed.heads_q * packed.dim_v, s.q0, from.o);
  for (std::int64_t h = 0; h < packed.heads_q; ++h)
    for (std::int64_t i = 0; i < s.p.seq_q; ++i)
      to.lse[h * packed.seq_q + s.q0 + i] = from.lse[h * s.p.seq_q + i];
}

}  // namespace

ForwardResult reference_forward_varlen(const Problem& packed, const Sequences& sequences,
                                       const PackedInputs& in, Oracle oracle) {
  ForwardResult out;
  out.o.assign(packed.seq_q * packed.heads_q * packed.dim_v, 0.0);
  out.lse.assign(packed.heads_q * packed.seq_q, 0.0);
  for (std::size_t b = 0; b + 1 < sequences.q_begin.size(); ++b) {
    const Sequence s = sequence(packed, sequences, in, b);
    put_forward(packed, s, oracle == Oracle::fp64 ? reference_forward(s.p, s.in)
                                                  : naive_same_dtype_forward(s.p, s.in),
                out);
  }
  return out;
}

BackwardResult reference_backward_varlen(const Problem& packed, const Sequences& sequences,
                                         const PackedInputs& in, Oracle oracle,
                                         ForwardResult* forward) {
  BackwardResult out;
  out.grad_q.assign(packed.seq_q * packed.heads_q * packed.dim_qk, 0.0);
  out.grad_k.assign(packed.seq_kv * packed.heads_kv * packed.dim_qk, 0.0);
  out.grad_v.assign(packed.seq_kv * packed.heads_kv * packed.dim_v, 0.0);
  ForwardResult fwd;
  fwd.o.assign(packed.seq_q * packed.heads_q * packed.dim_v, 0.0);
  fwd.lse.assign(packed.heads_q * packed.seq_q, 0.0);
  for (std::size_t b = 0; b + 1 < sequences.q_begin.size(); ++b) {
    const Sequence s = sequence(packed, sequences, in, b);
    ForwardResult f;
    const BackwardResult g = oracle == Oracle::fp64
                                 ? reference_backward(s.p, s.in, 0, &f)
                                 : naive_same_dtype_backward(s.p, s.in, 0, &f);
    put_forward(packed, s, f, fwd);
    put(out.grad_q, packed.heads_q * packed.dim_qk, s.q0, g.grad_q);
    put(out.grad_k, packed.heads_kv * packed.dim_qk, s.k0, g.grad_k);
    put(out.grad_v, packed.heads_kv * packed.dim_v, s.k0, g.grad_v);
    if (!g.grad_sinks.empty()) {  // summed over the sequences
      out.grad_sinks.resize(g.grad_sinks.size(), 0.0);
      for (std::size_t h = 0; h < g.grad_sinks.size(); ++h) out.grad_sinks[h] += g.grad_sinks[h];
    }
  }
  if (forward) *forward = std::move(fwd);
  return out;
}

KVCacheAsVarlen kvcache_as_varlen(const KVCacheForwardArgs& a, const Problem& per_sequence,
                                  bool rounded) {
  const std::int64_t batch = per_sequence.batch, seq_q = per_sequence.seq_q;
  const std::int64_t heads = per_sequence.heads_kv;
  const bool paged = a.block_table.data != nullptr;
  const bool appends = a.k_new.data != nullptr;
  const std::int64_t seq_new = appends ? a.k_new.shape[1] : 0;
  const std::int64_t page_size = a.k_cache.shape[1];
  const std::vector<double> k_cache = to_packed_double(a.k_cache);
  const std::vector<double> v_cache = to_packed_double(a.v_cache);
  const std::vector<double> k_new = appends ? to_packed_double(a.k_new) : std::vector<double>{};
  const std::vector<double> v_new = appends ? to_packed_double(a.v_new) : std::vector<double>{};

  KVCacheAsVarlen out;
  out.in.q = to_packed_double(a.q);  // [batch, seq_q, ...] = [1, batch · seq_q, ...]
  out.sequences.q_begin.push_back(0);
  out.sequences.k_begin.push_back(0);
  // Appends `dim` values of row `row` (of [.., rows, heads, dim] packed) for head h.
  const auto take = [&](std::vector<double>& to, const std::vector<double>& from,
                        std::int64_t row, std::int64_t h, std::int64_t dim) {
    const auto first = from.begin() + (row * heads + h) * dim;
    to.insert(to.end(), first, first + dim);
  };
  // An e4m3 cache's values as the call defines them (rounded to q's dtype
  // where `rounded`), appended ones as stored, from out.k / out.v's last
  // `dim` values.
  const bool quantized = a.k_cache.dtype == DType::e4m3;
  const auto dequantize = [&](std::vector<double>& to, std::int64_t dim, const HeadVectorView& s,
                              std::int64_t h, bool appended) {
    if (!quantized) return;
    const float scale = cache_scale(&s, h);
    for (auto it = to.end() - dim; it != to.end(); ++it) {
      const float stored = appended ? round_to_dtype(static_cast<float>(*it) / scale, DType::e4m3)
                                    : static_cast<float>(*it);
      const double value = static_cast<double>(stored) * scale;
      *it = rounded ? round_to_dtype(static_cast<float>(value), per_sequence.dtype) : value;
    }
  };
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t cached = a.cache_seqlens.at(b);
    for (std::int64_t t = 0; t < cached + seq_new; ++t) {
      for (std::int64_t h = 0; h < heads; ++h) {
        if (t >= cached) {
          const std::int64_t row = b * seq_new + (t - cached);
          take(out.in.k, k_new, row, h, per_sequence.dim_qk);
          take(out.in.v, v_new, row, h, per_sequence.dim_v);
          dequantize(out.in.k, per_sequence.dim_qk, a.k_scale, h, true);
          dequantize(out.in.v, per_sequence.dim_v, a.v_scale, h, true);
          continue;
        }
        // Contiguous: [b, t]; paged: [block_table[b][t / page_size], t % page_size].
        const std::int64_t row = paged ? a.block_table.at(b, t / page_size) * page_size +
                                             t % page_size
                                       : b * a.k_cache.shape[1] + t;
        take(out.in.k, k_cache, row, h, per_sequence.dim_qk);
        take(out.in.v, v_cache, row, h, per_sequence.dim_v);
        dequantize(out.in.k, per_sequence.dim_qk, a.k_scale, h, false);
        dequantize(out.in.v, per_sequence.dim_v, a.v_scale, h, false);
      }
    }
    out.sequences.q_begin.push_back((b + 1) * seq_q);
    out.sequences.k_begin.push_back(out.sequences.k_begin.back() + cached + seq_new);
  }
  out.packed = per_sequence;
  out.packed.batch = 1;
  out.packed.seq_q = batch * seq_q;
  out.packed.seq_kv = out.sequences.k_begin.back();
  return out;
}

}  // namespace flashgen::cpu
