#include "kvcache_case.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "attention_case.hpp"
#include "attention_check.hpp"
#include "common/dtype.hpp"
#include "common/problem.hpp"
#include "cpu/reference_sequences.hpp"

namespace flashgen::testing {
namespace {

Problem per_sequence_problem(const KVCase& c, std::int64_t batch) {
  Problem p;
  p.batch = batch, p.seq_q = c.seq_q;
  p.heads_q = c.heads_q, p.heads_kv = c.heads_kv, p.dim_qk = c.dim_qk, p.dim_v = c.dim_v;
  p.dtype = c.dtype;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.dim_qk));
  p.causal = c.causal;
  return p;
}

// The cache after the call: what it held, with row lengths[b] + i of
// sequence b replaced by new rows[b, i].
std::vector<double> expected_cache(const KVCase& c, const KVTensors& t,
                                   const std::vector<double>& before, const TestTensor& rows,
                                   std::int64_t dim, const std::vector<float>& scale) {
  std::vector<double> out = before;
  const std::vector<double> appended = rows.values(rows.download());
  const std::int64_t cache_rows = c.page_size ? c.page_size : c.capacity;
  for (std::int64_t b = 0; b < t.batch; ++b)
    for (std::int64_t i = 0; i < c.seq_new; ++i) {
      const std::int64_t pos = c.cache_lengths[b] + i;
      const std::int64_t row =
          c.page_size ? t.block_table[b * t.pages_per_sequence + pos / c.page_size] * cache_rows +
                            pos % c.page_size
                      : b * cache_rows + pos;
      for (std::int64_t h = 0; h < c.heads_kv; ++h)
        for (std::int64_t d = 0; d < dim; ++d) {
          const double x = appended[((b * c.seq_new + i) * c.heads_kv + h) * dim + d];
          // An fp8 cache stores x / scale rounded to e4m3.
          const float s = scale.empty() ? 1.0f : scale[scale.size() == 1 ? 0 : h];
          out[(row * c.heads_kv + h) * dim + d] =
              c.fp8 ? round_to_dtype(static_cast<float>(x) / s, DType::e4m3) : x;
        }
    }
  return out;
}

// A view of `t`'s downloaded bytes that the CPU reads (the reference's inputs).
TensorView readable(const TestTensor& t, std::vector<unsigned char>& bytes) {
  bytes = t.download();
  return t.host_view(bytes);
}

}  // namespace

std::vector<KVCase> kvcache_cases() {
  std::vector<KVCase> cases = {
      {"contiguous_decode", {5, 0, 1, 63}, 1, 0, 0, 64},
      {"contiguous_append_causal", {5, 0, 1, 40}, 3, 3, 0, 64, 2, 2, 32, 32, true},
      {"paged16_decode_append", {0, 1, 17, 100}, 1, 1, 16, 128},
      {"paged48_causal_chunk16_gqa8", {0, 30, 47, 200}, 16, 16, 48, 288, 8, 1, 64, 64, true},
      {"paged256_mqa_d40", {1, 255, 300}, 4, 2, 256, 512, 4, 1, 40, 40, true},
      {"paged32_odd_d127_f16", {31, 33}, 2, 0, 32, 96, 2, 2, 127, 127, false, DType::f16},
      {"empty_cache_no_append", {0, 0}, 2, 0, 16, 32, 2, 2, 16, 16, true},
  };
  KVCase scored{"paged16_append_score_options", {0, 1, 17, 90}, 3, 3, 16, 128, 4, 2, 32, 32, true};
  scored.sinks = true, scored.alibi_rank = 1, scored.window_left = 24;
  cases.push_back(scored);
  KVCase capped{"contiguous_decode_softcap_window_gqa4", {5, 40, 700}, 1, 1, 0, 1024, 8, 2, 64, 64};
  capped.softcap = 2.5, capped.window_left = 24, capped.sinks = true;
  cases.push_back(capped);
  KVCase top_left{"contiguous_top_left_chunk", {7, 40}, 5, 2, 0, 64, 2, 1, 32, 32, true};
  top_left.top_left = true, top_left.window_right = 1;
  cases.push_back(top_left);
  return cases;
}

KVTensors::KVTensors(const KVCase& c, MemoryKind memory)
    : memory(memory),
      batch(static_cast<std::int64_t>(c.cache_lengths.size())),
      pages_per_sequence(c.page_size ? c.capacity / c.page_size : 0),
      num_pages(batch * pages_per_sequence + 3),  // spare pages nobody uses
      q(memory, c.dtype, batch, c.seq_q, c.heads_q, c.dim_qk, Layout::bshd),
      k_cache(memory, c.fp8 ? DType::e4m3 : c.dtype, c.page_size ? num_pages : batch,
              c.page_size ? c.page_size : c.capacity, c.heads_kv, c.dim_qk, Layout::bshd),
      v_cache(memory, c.fp8 ? DType::e4m3 : c.dtype, c.page_size ? num_pages : batch,
              c.page_size ? c.page_size : c.capacity, c.heads_kv, c.dim_v, Layout::padded),
      k_new(memory, c.dtype, batch, c.seq_new, c.heads_kv, c.dim_qk, Layout::bshd),
      v_new(memory, c.dtype, batch, c.seq_new, c.heads_kv, c.dim_v, Layout::bhsd),
      o(memory, c.dtype, batch, c.seq_q, c.heads_q, c.dim_v, Layout::bshd),
      lse(TestTensor::row_stats(memory, batch, c.heads_q, c.seq_q)) {
  for (std::int64_t n : c.cache_lengths) cache_seqlens.push_back(static_cast<std::int32_t>(n));
  // Pages in a shuffled order, so sequence b's pages are neither adjacent nor ascending.
  std::vector<std::int32_t> pages(static_cast<std::size_t>(num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(seed_from(c.name)));
  block_table.assign(pages.begin(), pages.begin() + batch * pages_per_sequence);
  cache_seqlens_storage = stored(cache_seqlens, memory);
  block_table_storage = stored(block_table, memory);
  // Scales that are not powers of two, so that the conversions round.
  const std::int64_t scales = c.scale_rank == 2 ? c.heads_kv : c.scale_rank;
  for (std::int64_t h = 0; h < scales; ++h) {
    k_scale.push_back(0.3f + 0.05f * static_cast<float>(h));
    v_scale.push_back(1.7f - 0.1f * static_cast<float>(h));
  }
  k_scale_storage = stored(k_scale, memory);
  v_scale_storage = stored(v_scale, memory);
  q.fill_random(seed_from(c.name + "/q"));
  k_cache.fill_random(seed_from(c.name + "/k_cache"));
  v_cache.fill_random(seed_from(c.name + "/v_cache"));
  k_new.fill_random(seed_from(c.name + "/k_new"));
  v_new.fill_random(seed_from(c.name + "/v_new"));
  o.poison(), lse.poison();
}

KVCacheForwardArgs KVTensors::args(const KVCase& c) const {
  KVCacheForwardArgs a;
  a.q = q.view(), a.k_cache = k_cache.view(), a.v_cache = v_cache.view();
  const int device = q.view().device;
  a.cache_seqlens = IndexView::vector(static_cast<const std::int32_t*>(cache_seqlens_storage->data()),
                                      batch, memory, device);
  if (c.page_size)
    a.block_table =
        IndexView::matrix(static_cast<const std::int32_t*>(block_table_storage->data()), batch,
                          pages_per_sequence, memory, device);
  if (c.seq_new) a.k_new = k_new.view(), a.v_new = v_new.view();
  if (!k_scale.empty()) {
    a.k_scale = HeadVectorView::heads(static_cast<float*>(k_scale_storage->data()),
                                      static_cast<std::int64_t>(k_scale.size()), memory, device);
    a.v_scale = HeadVectorView::heads(static_cast<float*>(v_scale_storage->data()),
                                      static_cast<std::int64_t>(v_scale.size()), memory, device);
  }
  a.o = o.view(), a.lse = lse.stats_view();
  return a;
}

KVOptions kv_options(const KVCase& c, std::int64_t batch, MemoryKind memory, int device,
                     Backend backend) {
  KVOptions out;
  Options& options = out.options;
  options.backend = backend;
  options.causal = c.causal;
  if (c.top_left) options.causal_alignment = CausalAlignment::top_left;
  options.window_left = c.window_left, options.window_right = c.window_right;
  options.softcap = c.softcap;
  options.mask_mod = c.mask_mod;
  if (c.sinks) {
    std::vector<float> sinks;
    for (std::int64_t h = 0; h < c.heads_q; ++h) sinks.push_back(sink_value(h, c.heads_q));
    out.sinks = stored(sinks, memory);
    options.sinks = HeadVectorView::heads(static_cast<float*>(out.sinks->data()), c.heads_q,
                                          memory, device);
  }
  if (c.alibi_rank > 0) {
    std::vector<float> slopes;
    const std::int64_t rows = c.alibi_rank == 2 ? batch : 1;
    for (std::int64_t b = 0; b < rows; ++b)
      for (std::int64_t h = 0; h < c.heads_q; ++h) slopes.push_back(alibi_slope_value(b, h));
    out.slopes = stored(slopes, memory);
    float* data = static_cast<float*>(out.slopes->data());
    options.alibi_slopes = c.alibi_rank == 2
                               ? HeadVectorView::batch_heads(data, batch, c.heads_q, memory, device)
                               : HeadVectorView::heads(data, c.heads_q, memory, device);
  }
  return out;
}

void check_kvcache_forward(const KVCase& c, KVTensors& t, const Options& options) {
  // The reference reads host copies of the inputs, and of the score options.
  std::vector<unsigned char> q, k_cache, v_cache, k_new, v_new;
  KVCacheForwardArgs host = t.args(c);
  host.q = readable(t.q, q), host.k_cache = readable(t.k_cache, k_cache);
  host.v_cache = readable(t.v_cache, v_cache);
  if (c.seq_new) host.k_new = readable(t.k_new, k_new), host.v_new = readable(t.v_new, v_new);
  host.cache_seqlens = IndexView::vector(t.cache_seqlens.data(), t.batch);
  if (c.page_size)
    host.block_table = IndexView::matrix(t.block_table.data(), t.batch, t.pages_per_sequence);
  if (!t.k_scale.empty()) {
    const auto heads = static_cast<std::int64_t>(t.k_scale.size());
    host.k_scale = HeadVectorView::heads(t.k_scale.data(), heads);
    host.v_scale = HeadVectorView::heads(t.v_scale.data(), heads);
  }
  const KVOptions host_options = kv_options(c, t.batch, MemoryKind::host, 0, Backend::cpu);
  Problem p = per_sequence_problem(c, t.batch);
  copy_score_options(host_options.options, p);
  // Before the call. An fp8 cache's values: exact for the reference, rounded
  // to q's dtype for the naive same-dtype computation (as the CPU backend
  // holds them; the GPU's kernels take them exactly).
  const cpu::KVCacheAsVarlen varlen = cpu::kvcache_as_varlen(host, p, false);
  const cpu::KVCacheAsVarlen rounded = cpu::kvcache_as_varlen(host, p, true);
  const std::vector<double> k_before = t.k_cache.values(t.k_cache.download());
  const std::vector<double> v_before = t.v_cache.values(t.v_cache.download());

  forward_with_kvcache(t.args(c), options);

  const cpu::ForwardResult ref = cpu::reference_forward_varlen(
      varlen.packed, varlen.sequences, varlen.in, cpu::Oracle::fp64);
  const cpu::ForwardResult naive = cpu::reference_forward_varlen(
      rounded.packed, rounded.sequences, rounded.in, cpu::Oracle::naive_same_dtype);
  // lse [batch, heads, seq_q] from the reference's [1, heads, batch · seq_q].
  std::vector<double> ref_lse(ref.lse.size()), naive_lse(ref.lse.size());
  for (std::int64_t b = 0; b < t.batch; ++b)
    for (std::int64_t h = 0; h < c.heads_q; ++h)
      for (std::int64_t i = 0; i < c.seq_q; ++i) {
        const std::size_t from = (h * t.batch + b) * c.seq_q + i;
        const std::size_t to = (b * c.heads_q + h) * c.seq_q + i;
        ref_lse[to] = ref.lse[from], naive_lse[to] = naive.lse[from];
      }
  for (TestTensor* out : {&t.o, &t.lse}) {
    const std::vector<unsigned char> now = out->download();
    EXPECT_EQ(out->check_all_written(now) + out->check_outside_unchanged(now), "");
  }
  EXPECT_EQ(tolerance_violation("o", t.o, t.o.values(t.o.download()), ref.o, naive.o, c.dtype), "");
  EXPECT_EQ(tolerance_violation("lse", t.lse, t.lse.values(t.lse.download()), ref_lse, naive_lse,
                                DType::f32),
            "");
  EXPECT_EQ(t.k_cache.values(t.k_cache.download()),
            expected_cache(c, t, k_before, t.k_new, c.dim_qk, t.k_scale));
  EXPECT_EQ(t.v_cache.values(t.v_cache.download()),
            expected_cache(c, t, v_before, t.v_new, c.dim_v, t.v_scale));
  for (const TestTensor* cache : {&t.k_cache, &t.v_cache})
    EXPECT_EQ(cache->check_outside_unchanged(cache->download()), "");
  for (const TestTensor* input : {&t.q, &t.k_new, &t.v_new})
    EXPECT_EQ(input->check_unchanged(input->download()), "");
}

}  // namespace flashgen::testing
