// forward_with_kvcache on CUDA tensors (the caches read in place by the
// split-key forward, cache_seqlens and block_table in device memory) against
// the fp64 reference: the cases every backend runs, decode shapes long
// enough to split the keys over CTAs and to pack a group's query heads,
// block-table entries outside the pool (never dereferenced), and what is
// refused with a clear error.
#include <gtest/gtest.h>

#include "fails_with.hpp"
#include "kvcache_case.hpp"

namespace flashgen::testing {
namespace {

constexpr MemoryKind kGpu = MemoryKind::cuda;

std::vector<KVCase> gpu_cases() {
  std::vector<KVCase> cases = kvcache_cases();
  // Keys shared by several CTAs per query block, query heads packed as rows.
  cases.push_back({"decode_split_gqa4_d128", {3000, 17, 0, 1025}, 1, 1, 0, 4096, 8, 2, 128, 128});
  cases.push_back({"paged16_decode_split_gqa8", {5000, 1, 300}, 1, 1, 16, 8192, 16, 2, 128, 128});
  cases.push_back({"paged64_chunk_causal_d256", {2000, 63}, 4, 4, 64, 2048, 4, 2, 256, 256, true});
  cases.push_back({"paged16_odd_d199_append", {1500, 16}, 2, 2, 16, 2048, 2, 1, 199, 199, true});
  KVCase sinks{"paged32_decode_sinks_gqa8_d64", {4000, 9}, 1, 1, 32, 4096, 16, 2, 64, 64};
  sinks.sinks = true;
  cases.push_back(sinks);
  KVCase alibi{"contiguous_decode_alibi_rows_gqa4", {2000, 5}, 1, 1, 0, 2048, 8, 2, 64, 64};
  alibi.alibi_rank = 2;
  cases.push_back(alibi);
  // fp8 caches, converted on their way into shared memory: scales per
  // key/value head, one for all, none; rows whose bytes are 16-byte aligned
  // or not (D = 40, 127: tails read byte by byte); appends straddling a
  // 16-row run; f16 and bf16.
  const auto fp8 = [](KVCase c, int scale_rank) {
    c.fp8 = true, c.scale_rank = scale_rank;
    return c;
  };
  cases.push_back(fp8({"fp8_paged16_append_scale_per_head", {0, 1, 17, 90}, 3, 3, 16, 128, 4, 2,
                       32, 32, true},
                      2));
  KVCase fp8_sinks = fp8({"fp8_contiguous_decode_one_scale_f16_sinks", {5, 40}, 1, 1, 0, 64, 2, 1,
                          40, 40, false, DType::f16},
                         1);
  fp8_sinks.sinks = true;
  cases.push_back(fp8_sinks);
  cases.push_back(fp8({"fp8_paged16_decode_split_gqa8_d128", {5000, 1, 300}, 1, 1, 16, 8192, 16, 2,
                       128, 128},
                      2));
  cases.push_back(fp8({"fp8_contiguous_decode_split_gqa4_no_scale", {3000, 17, 0, 1025}, 1, 1, 0,
                       4096, 8, 2, 128, 128},
                      0));
  cases.push_back(fp8({"fp8_paged16_odd_d127_append_causal", {1500, 16}, 2, 2, 16, 2048, 2, 1, 127,
                       127, true, DType::f16},
                      2));
  cases.push_back(fp8({"fp8_paged64_chunk_causal_d256", {2000, 63}, 4, 4, 64, 2048, 4, 2,
                       256, 256, true},
                      1));
  KVCase fp8_window = fp8({"fp8_paged32_decode_window_softcap_gqa8_d64", {4000, 9}, 1, 1, 32, 4096,
                           16, 2, 64, 64},
                          2);
  fp8_window.window_left = 1000, fp8_window.softcap = 30.0;
  cases.push_back(fp8_window);
  // Chunked prefill: hundreds of query rows appended and attended causally,
  // the split-key forward in CTAs of four warps.
  cases.push_back({"paged16_chunked_prefill_append_causal_gqa4", {700, 0, 33}, 200, 200, 16, 1024,
                   8, 2, 128, 128, true});
  KVCase fp8_chunk = fp8({"fp8_contiguous_chunked_prefill_window_d64", {300, 64}, 96, 96, 0, 512,
                          4, 2, 64, 64, true},
                         2);
  fp8_chunk.window_left = 50;
  cases.push_back(fp8_chunk);
  // Mask expressions: each entry's cells over its own keys (a slot per
  // entry, with or without b), decode and chunked, paged and fp8.
  KVCase mask_decode{"paged16_decode_mask_b_gqa4", {2000, 17, 300}, 1, 1, 16, 2048, 8, 2, 64, 64};
  mask_decode.mask_mod = "(kv_idx + b) % 7 != 3 && kv_idx != q_idx - 5";
  cases.push_back(mask_decode);
  KVCase mask_chunk{"contiguous_chunk_mask_causal", {100, 0, 37}, 40, 40, 0, 256, 4, 2, 64, 64,
                    true};
  mask_chunk.mask_mod = "kv_idx / 16 % 3 != q_idx % 3";
  cases.push_back(mask_chunk);
  KVCase mask_fp8 = fp8({"fp8_paged16_append_mask_d128", {300, 5}, 3, 3, 16, 512, 4, 1, 128, 128,
                         true},
                        1);
  mask_fp8.mask_mod = "q_idx - kv_idx < 100 || kv_idx < 4";
  cases.push_back(mask_fp8);
  return cases;
}

class GpuKVCache : public ::testing::TestWithParam<KVCase> {};

TEST_P(GpuKVCache, MatchesTheReferenceAndAppends) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const KVCase& c = GetParam();
  KVTensors t(c, kGpu);
  const KVOptions options = kv_options(c, t.batch, kGpu, t.q.view().device, Backend::cuda);
  check_kvcache_forward(c, t, options.options);
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuKVCache, ::testing::ValuesIn(gpu_cases()),
                         [](const auto& info) { return info.param.name; });

// A block table naming pages outside [0, num_pages) for pages the call reads
// and appends to: the kernel reads those rows as zeros and drops the
// appends, and touches no byte outside the caches.
TEST(GpuKVCacheEdges, BlockTableEntriesOutsideThePoolAreNeverDereferenced) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const KVCase c{"bad_pages", {40, 20}, 1, 1, 16, 64, 2, 2, 64, 64};
  KVTensors t(c, kGpu);
  t.block_table[1] = -1;                                    // sequence 0, rows 16-31
  t.block_table[t.pages_per_sequence + 1] = static_cast<std::int32_t>(t.num_pages + 7);  // sequence 1's append
  t.block_table_storage->upload(t.block_table.data(), sizeof(std::int32_t) * t.block_table.size());
  Options options;
  options.backend = Backend::cuda;
  forward_with_kvcache(t.args(c), options);
  for (const TestTensor* cache : {&t.k_cache, &t.v_cache})
    EXPECT_EQ(cache->check_outside_unchanged(cache->download()), "");
  const std::vector<unsigned char> o = t.o.download();
  EXPECT_EQ(t.o.check_all_written(o) + t.o.check_outside_unchanged(o), "");
}

// check_indices: the same entries reported by name before anything runs
// (the caches unchanged), as host tensors' are.
TEST(GpuKVCacheEdges, CheckedIndicesAreReportedByName) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const KVCase c{"checked", {40, 20}, 1, 1, 16, 64, 2, 2, 64, 64};
  KVTensors t(c, kGpu);
  t.block_table[1] = -1;
  t.block_table_storage->upload(t.block_table.data(), sizeof(std::int32_t) * t.block_table.size());
  KVCacheForwardArgs args = t.args(c);
  args.check_indices = true;
  Options options;
  options.backend = Backend::cuda;
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument,
                         "block_table[0][1] (-1) must be in [0, num_pages",
                         [&] { forward_with_kvcache(args, options); }));
  for (const TestTensor* cache : {&t.k_cache, &t.v_cache})
    EXPECT_EQ(cache->check_unchanged(cache->download()), "");
  t.cache_seqlens = {64, 0};  // 64 + the appended row > 64 rows a sequence holds
  t.cache_seqlens_storage->upload(t.cache_seqlens.data(), sizeof(std::int32_t) * 2);
  t.block_table[1] = 2;
  t.block_table_storage->upload(t.block_table.data(), sizeof(std::int32_t) * t.block_table.size());
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "cache_seqlens[0] (64)",
                         [&] { forward_with_kvcache(args, options); }));
}

// What the GPU does not run yet is refused by name, before anything runs.
TEST(GpuKVCacheEdges, RefusesFloat32ByName) {
  FLASHGEN_SKIP_WITHOUT_GPU();
  const KVCase f32{"f32", {4, 2}, 1, 0, 0, 16, 2, 2, 32, 32, false, DType::f32};
  KVTensors t(f32, kGpu);
  Options options;
  options.backend = Backend::cuda;
  EXPECT_TRUE(fails_with(ErrorCode::unsupported, "forward_with_kvcache with float32 tensors",
                         [&] { forward_with_kvcache(t.args(f32), options); }));
}

}  // namespace
}  // namespace flashgen::testing
