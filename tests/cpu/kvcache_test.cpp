// forward_with_kvcache on the CPU against the fp64 reference of the same
// call restated as a ragged batch (cpu::kvcache_as_varlen): contiguous and
// paged caches (pages out of order, page sizes other than the tile), append
// of new rows, cache_seqlens 0 and 1, decode (seq_q = 1) and causal seq_q > 1,
// GQA 8:1 and MQA, odd head dimensions. After the call the cache holds the
// appended rows and is otherwise unchanged.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attention_check.hpp"
#include "cpu/reference_sequences.hpp"
#include "flashgen/sequences.hpp"
#include "test_tensor.hpp"

namespace flashgen::testing {
namespace {

constexpr MemoryKind kHost = MemoryKind::host;

struct KVCase {
  std::string name;
  std::vector<std::int64_t> cache_lengths;  // per sequence, before the append
  std::int64_t seq_q = 1, seq_new = 0;
  std::int64_t page_size = 0;   // 0: contiguous cache
  std::int64_t capacity = 64;   // rows per sequence (a multiple of page_size when paged)
  std::int64_t heads_q = 2, heads_kv = 2, dim_qk = 32, dim_v = 32;
  bool causal = false;
  DType dtype = DType::bf16;
  // Sinks per query head, ALiBi slopes ([heads_q], or [batch, heads_q]
  // with alibi_rank 2), a window and a soft cap.
  bool score_options = false;
  int alibi_rank = 1;
};

void PrintTo(const KVCase& c, std::ostream* os) { *os << c.name; }

struct KVTensors {
  explicit KVTensors(const KVCase& c)
      : batch(static_cast<std::int64_t>(c.cache_lengths.size())),
        pages_per_sequence(c.page_size ? c.capacity / c.page_size : 0),
        num_pages(batch * pages_per_sequence + 3),  // spare pages nobody uses
        q(kHost, c.dtype, batch, c.seq_q, c.heads_q, c.dim_qk, Layout::bshd),
        k_cache(kHost, c.dtype, c.page_size ? num_pages : batch,
                c.page_size ? c.page_size : c.capacity, c.heads_kv, c.dim_qk, Layout::bshd),
        v_cache(kHost, c.dtype, c.page_size ? num_pages : batch,
                c.page_size ? c.page_size : c.capacity, c.heads_kv, c.dim_v, Layout::padded),
        k_new(kHost, c.dtype, batch, c.seq_new, c.heads_kv, c.dim_qk, Layout::bshd),
        v_new(kHost, c.dtype, batch, c.seq_new, c.heads_kv, c.dim_v, Layout::bhsd),
        o(kHost, c.dtype, batch, c.seq_q, c.heads_q, c.dim_v, Layout::bshd),
        lse(TestTensor::row_stats(kHost, batch, c.heads_q, c.seq_q)) {
    for (std::int64_t n : c.cache_lengths) cache_seqlens.push_back(static_cast<std::int32_t>(n));
    // Pages in a shuffled order, so sequence b's pages are neither adjacent nor ascending.
    std::vector<std::int32_t> pages(static_cast<std::size_t>(num_pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), std::mt19937(seed_from(c.name)));
    block_table.assign(pages.begin(), pages.begin() + batch * pages_per_sequence);
    q.fill_random(seed_from(c.name + "/q"));
    k_cache.fill_random(seed_from(c.name + "/k_cache"));
    v_cache.fill_random(seed_from(c.name + "/v_cache"));
    k_new.fill_random(seed_from(c.name + "/k_new"));
    v_new.fill_random(seed_from(c.name + "/v_new"));
    o.poison(), lse.poison();
  }

  KVCacheForwardArgs args(const KVCase& c) const {
    KVCacheForwardArgs a;
    a.q = q.view(), a.k_cache = k_cache.view(), a.v_cache = v_cache.view();
    a.cache_seqlens = IndexView::vector(cache_seqlens.data(), batch);
    if (c.page_size) a.block_table = IndexView::matrix(block_table.data(), batch, pages_per_sequence);
    if (c.seq_new) a.k_new = k_new.view(), a.v_new = v_new.view();
    a.o = o.view(), a.lse = lse.stats_view();
    return a;
  }

  std::int64_t batch, pages_per_sequence, num_pages;
  std::vector<std::int32_t> cache_seqlens, block_table;
  TestTensor q, k_cache, v_cache, k_new, v_new, o, lse;
};

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
                                   std::int64_t dim) {
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
        for (std::int64_t d = 0; d < dim; ++d)
          out[(row * c.heads_kv + h) * dim + d] =
              appended[((b * c.seq_new + i) * c.heads_kv + h) * dim + d];
    }
  return out;
}

std::vector<KVCase> kvcache_cases() {
  return {
      {"contiguous_decode", {5, 0, 1, 63}, 1, 0, 0, 64},
      {"contiguous_append_causal", {5, 0, 1, 40}, 3, 3, 0, 64, 2, 2, 32, 32, true},
      {"paged16_decode_append", {0, 1, 17, 100}, 1, 1, 16, 128},
      {"paged48_causal_chunk16_gqa8", {0, 30, 47, 200}, 16, 16, 48, 288, 8, 1, 64, 64, true},
      {"paged256_mqa_d40", {1, 255, 300}, 4, 2, 256, 512, 4, 1, 40, 40, true},
      {"paged32_odd_d127_f16", {31, 33}, 2, 0, 32, 96, 2, 2, 127, 127, false, DType::f16},
      {"contiguous_f32_dv24_spec", {10, 3}, 5, 5, 0, 32, 3, 1, 40, 24, true, DType::f32},
      {"empty_cache_no_append", {0, 0}, 2, 0, 16, 32, 2, 2, 16, 16, true},
      {"paged16_append_score_options", {0, 1, 17, 90}, 3, 3, 16, 128, 4, 2, 32, 32, true,
       DType::bf16, true},
      {"contiguous_decode_score_options_f32", {5, 40}, 1, 0, 0, 64, 2, 1, 40, 40, false,
       DType::f32, true, 2},
  };
}

class CpuKVCache : public ::testing::TestWithParam<KVCase> {};

TEST_P(CpuKVCache, MatchesTheReferenceAndAppends) {
  const KVCase& c = GetParam();
  KVTensors t(c);
  const KVCacheForwardArgs args = t.args(c);
  Options options;
  options.backend = Backend::cpu;
  options.causal = c.causal;
  std::vector<float> sinks, slopes;
  if (c.score_options) {
    for (std::int64_t h = 0; h < c.heads_q; ++h) sinks.push_back(sink_value(h, c.heads_q));
    const std::int64_t rows = c.alibi_rank == 2 ? t.batch : 1;
    for (std::int64_t b = 0; b < rows; ++b)
      for (std::int64_t h = 0; h < c.heads_q; ++h) slopes.push_back(alibi_slope_value(b, h));
    options.sinks = HeadVectorView::heads(sinks.data(), c.heads_q);
    options.alibi_slopes = c.alibi_rank == 2
                               ? HeadVectorView::batch_heads(slopes.data(), t.batch, c.heads_q)
                               : HeadVectorView::heads(slopes.data(), c.heads_q);
    options.window_left = 24;
    options.softcap = 2.5;
  }
  Problem p = per_sequence_problem(c, t.batch);
  copy_score_options(options, p);
  const cpu::KVCacheAsVarlen varlen = cpu::kvcache_as_varlen(args, p);  // before the call
  const std::vector<double> k_before = t.k_cache.values(t.k_cache.download());
  const std::vector<double> v_before = t.v_cache.values(t.v_cache.download());
  forward_with_kvcache(args, options);

  const cpu::ForwardResult ref = cpu::reference_forward_varlen(
      varlen.packed, varlen.sequences, varlen.in, cpu::Oracle::fp64);
  const cpu::ForwardResult naive = cpu::reference_forward_varlen(
      varlen.packed, varlen.sequences, varlen.in, cpu::Oracle::naive_same_dtype);
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
            expected_cache(c, t, k_before, t.k_new, c.dim_qk));
  EXPECT_EQ(t.v_cache.values(t.v_cache.download()),
            expected_cache(c, t, v_before, t.v_new, c.dim_v));
  for (const TestTensor* cache : {&t.k_cache, &t.v_cache})
    EXPECT_EQ(cache->check_outside_unchanged(cache->download()), "");
  for (const TestTensor* input : {&t.q, &t.k_new, &t.v_new})
    EXPECT_EQ(input->check_unchanged(input->download()), "");
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuKVCache, ::testing::ValuesIn(kvcache_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(CpuKVCacheEdges, AnEmptyCacheWithoutAppendGivesZerosAndMinusInfinity) {
  const KVCase c{"empty", {0, 3}, 2, 0, 16, 32, 1, 1, 16, 16};
  KVTensors t(c);
  Options options;
  options.backend = Backend::cpu;
  forward_with_kvcache(t.args(c), options);
  const std::vector<double> o = t.o.values(t.o.download());
  const std::vector<double> lse = t.lse.values(t.lse.download());
  for (std::int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(lse[i], -INFINITY);
    EXPECT_TRUE(std::isfinite(lse[2 + i]));
  }
  for (std::int64_t e = 0; e < 2 * 16; ++e) EXPECT_EQ(o[e], 0.0);
}

}  // namespace
}  // namespace flashgen::testing
