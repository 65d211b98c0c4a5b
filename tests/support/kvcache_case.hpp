// forward_with_kvcache as the tests run it on either backend: cases of
// cache lengths, appends and page sizes, their tensors in host or CUDA
// memory (cache_seqlens and block_table there too), and the check against
// the fp64 reference of the same call restated as a ragged batch
// (cpu::kvcache_as_varlen).
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "device_storage.hpp"
#include "flashgen/sequences.hpp"
#include "test_tensor.hpp"

namespace flashgen::testing {

struct KVCase {
  std::string name;
  std::vector<std::int64_t> cache_lengths;  // per sequence, before the append
  std::int64_t seq_q = 1, seq_new = 0;
  std::int64_t page_size = 0;   // 0: contiguous cache
  std::int64_t capacity = 64;   // rows per sequence (a multiple of page_size when paged)
  std::int64_t heads_q = 2, heads_kv = 2, dim_qk = 32, dim_v = 32;
  bool causal = false;
  DType dtype = DType::bf16;
  // Score options: sinks per query head (sink_value), ALiBi slopes
  // (alibi_slope_value: 0 none, 1 [heads_q], 2 [batch, heads_q]), a window
  // and a soft cap; top-left causal.
  bool sinks = false;
  int alibi_rank = 0;
  std::int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  bool top_left = false;
  // An fp8 (e4m3) cache, with scales: 0 none, 1 one ([1]), 2 per key/value head.
  bool fp8 = false;
  int scale_rank = 0;
  // A mask expression over b, h, q_idx and kv_idx (no arrays).
  std::string mask_mod;
};

inline void PrintTo(const KVCase& c, std::ostream* os) { *os << c.name; }

// The cases every backend runs: contiguous and paged caches (pages out of
// order, page sizes other than the tile), appends, cache_seqlens 0 and 1,
// decode and causal seq_q > 1, GQA 8:1 and MQA, odd head dimensions.
std::vector<KVCase> kvcache_cases();

// The tensors of a case in `memory`: the caches hold random rows, their
// pages (when paged) shuffled with spare pages nobody uses.
struct KVTensors {
  KVTensors(const KVCase& c, MemoryKind memory);
  KVCacheForwardArgs args(const KVCase& c) const;

  MemoryKind memory;
  std::int64_t batch, pages_per_sequence, num_pages;
  std::vector<std::int32_t> cache_seqlens, block_table;  // host copies
  std::unique_ptr<Storage> cache_seqlens_storage, block_table_storage;  // where the call reads them
  std::vector<float> k_scale, v_scale;  // host copies (empty: none)
  std::unique_ptr<Storage> k_scale_storage, v_scale_storage;
  TestTensor q, k_cache, v_cache, k_new, v_new, o, lse;
};

// The case's options for `backend`, its sinks and slopes in the tensors'
// memory (kept alive here).
struct KVOptions {
  Options options;
  std::unique_ptr<Storage> sinks, slopes;
};
KVOptions kv_options(const KVCase& c, std::int64_t batch, MemoryKind memory, int device,
                     Backend backend);

// Runs forward_with_kvcache with `options` and checks O and LSE against the
// reference, the caches (appended rows in place, nothing else changed) and
// the inputs unchanged.
void check_kvcache_forward(const KVCase& c, KVTensors& t, const Options& options);

}  // namespace flashgen::testing
