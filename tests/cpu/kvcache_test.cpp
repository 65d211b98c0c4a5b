// forward_with_kvcache on the CPU against the fp64 reference of the same
// call restated as a ragged batch (kvcache_case.hpp): the cases every
// backend runs, and those only the CPU backend takes (fp32, ALiBi with a
// soft cap, fp8 caches). After the call the cache holds the appended rows and is
// otherwise unchanged.
#include <cmath>

#include <gtest/gtest.h>

#include "kvcache_case.hpp"

namespace flashgen::testing {
namespace {

constexpr MemoryKind kHost = MemoryKind::host;

std::vector<KVCase> cpu_cases() {
  std::vector<KVCase> cases = kvcache_cases();
  cases.push_back({"contiguous_f32_dv24_spec", {10, 3}, 5, 5, 0, 32, 3, 1, 40, 24, true, DType::f32});
  KVCase scored{"paged16_append_alibi_softcap", {0, 1, 17, 90}, 3, 3, 16, 128, 4, 2, 32, 32, true};
  scored.sinks = true, scored.alibi_rank = 1, scored.window_left = 24, scored.softcap = 2.5;
  cases.push_back(scored);
  KVCase f32{"contiguous_decode_score_options_f32", {5, 40}, 1, 0, 0, 64, 2, 1, 40, 40, false,
             DType::f32};
  f32.sinks = true, f32.alibi_rank = 2, f32.window_left = 24, f32.softcap = 2.5;
  cases.push_back(f32);
  // fp8 caches: scales per key/value head, one scale, none.
  KVCase fp8_paged{"paged16_fp8_append_scale_per_head", {0, 1, 17, 90}, 3, 3, 16, 128, 4, 2, 32, 32,
                   true};
  fp8_paged.fp8 = true, fp8_paged.scale_rank = 2;
  cases.push_back(fp8_paged);
  KVCase fp8_decode{"contiguous_fp8_decode_one_scale_f16", {5, 40}, 1, 1, 0, 64, 2, 1, 40, 40,
                    false, DType::f16};
  fp8_decode.fp8 = true, fp8_decode.scale_rank = 1, fp8_decode.sinks = true;
  cases.push_back(fp8_decode);
  KVCase fp8_plain{"contiguous_fp8_no_scale_f32", {7, 0}, 2, 0, 0, 32, 2, 2, 16, 16, true,
                   DType::f32};
  fp8_plain.fp8 = true;
  cases.push_back(fp8_plain);
  return cases;
}

class CpuKVCache : public ::testing::TestWithParam<KVCase> {};

TEST_P(CpuKVCache, MatchesTheReferenceAndAppends) {
  const KVCase& c = GetParam();
  KVTensors t(c, kHost);
  const KVOptions options = kv_options(c, t.batch, kHost, 0, Backend::cpu);
  check_kvcache_forward(c, t, options.options);
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuKVCache, ::testing::ValuesIn(cpu_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(CpuKVCacheEdges, AnEmptyCacheWithoutAppendGivesZerosAndMinusInfinity) {
  const KVCase c{"empty", {0, 3}, 2, 0, 16, 32, 1, 1, 16, 16};
  KVTensors t(c, kHost);
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
