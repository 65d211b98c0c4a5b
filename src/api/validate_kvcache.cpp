// Rules of forward_with_kvcache, in the order of validate_sequences.cpp:
// options; each operand on its own; agreement; overlap of outputs (the
// caches are outputs when the call appends); then, for host tensors, the
// values of cache_seqlens and of the block_table entries the call reads
// (on the GPU the kernels clamp and skip instead: flashgen/sequences.hpp).
#include <string>
#include <vector>

#include "api/operands.hpp"
#include "api/plan.hpp"
#include "api/validate.hpp"
#include "api/validate_sequences.hpp"

namespace flashgen::api {
namespace {

constexpr const char* kPerSequenceAxes[2] = {"batch", "1"};
constexpr const char* kBlockTableAxes[2] = {"batch", "max_pages"};
constexpr const char* kCacheAxes[4] = {"batch", "seq_cache", "heads_kv", "dim_qk"};
constexpr const char* kValueCacheAxes[4] = {"batch", "seq_cache", "heads_kv", "dim_v"};
constexpr const char* kPagedAxes[4] = {"num_pages", "page_size", "heads_kv", "dim_qk"};
constexpr const char* kValuePagedAxes[4] = {"num_pages", "page_size", "heads_kv", "dim_v"};
constexpr const char* kNewKeyAxes[4] = {"batch", "seq_new", "heads_kv", "dim_qk"};
constexpr const char* kNewValueAxes[4] = {"batch", "seq_new", "heads_kv", "dim_v"};

long long ll(std::int64_t x) { return static_cast<long long>(x); }

// cache_seqlens[b] >= 0 and room for the append; for a paged cache, every
// block_table entry of a page the call reads or writes lies in [0, num_pages)
// (entries past the sequence's last page are never read, so not checked).
std::vector<std::int64_t> read_cache_lengths(const KVCacheForwardArgs& a,
                                             const KVCacheProblem& kv) {
  const std::int64_t batch = kv.base.batch, num_pages = a.k_cache.shape[0];
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t length = a.cache_seqlens.at(b);
    if (length < 0)
      fail("cache_seqlens[%lld] (%lld) must be >= 0", ll(b), ll(length));
    if (length + kv.seq_new > kv.capacity)
      fail("cache_seqlens[%lld] (%lld) + the appended rows (seq_new = %lld) must be <= the "
           "cache's rows per sequence (%lld%s)",
           ll(b), ll(length), ll(kv.seq_new), ll(kv.capacity),
           kv.paged ? " = max_pages · page_size" : " = seq_cache");
    lengths[b] = length;
    if (!kv.paged) continue;
    const std::int64_t pages = (length + kv.seq_new + kv.page_size - 1) / kv.page_size;
    for (std::int64_t page = 0; page < pages; ++page) {
      const std::int64_t entry = a.block_table.at(b, page);
      if (entry < 0 || entry >= num_pages)
        fail("block_table[%lld][%lld] (%lld) must be in [0, num_pages = %lld): sequence %lld "
             "reads page %lld of its cache",
             ll(b), ll(page), ll(entry), ll(num_pages), ll(b), ll(page));
    }
  }
  return lengths;
}

}  // namespace

KVCacheProblem validate_kvcache_forward(const KVCacheForwardArgs& a, const Options& options) {
  validate_options(options);
  KVCacheProblem kv;
  kv.paged = a.block_table.data != nullptr;
  const bool appends = a.k_new.data != nullptr || a.v_new.data != nullptr;
  const bool has_lse = a.lse.data != nullptr;

  // An fp8 cache (both caches e4m3) stores what the others compute in.
  check_dtype("k_cache", a.k_cache.dtype, true);
  check_dtype("v_cache", a.v_cache.dtype, true);
  kv.quantized = a.k_cache.dtype == DType::e4m3;
  if (kv.quantized && a.v_cache.dtype != DType::e4m3)
    fail("v_cache.dtype (%s) must equal k_cache.dtype (e4m3): both caches are fp8 or neither",
         to_string(a.v_cache.dtype));
  std::vector<std::pair<const char*, DType>> dtypes = {{"q", a.q.dtype}, {"o", a.o.dtype}};
  if (!kv.quantized)
    dtypes.insert(dtypes.end(), {{"k_cache", a.k_cache.dtype}, {"v_cache", a.v_cache.dtype}});
  if (appends) dtypes.insert(dtypes.end(), {{"k_new", a.k_new.dtype}, {"v_new", a.v_new.dtype}});
  for (const auto& [name, dtype] : dtypes) check_dtype(name, dtype);
  for (const auto& [name, scale] : {std::pair{"k_scale", &a.k_scale}, {"v_scale", &a.v_scale}})
    if (scale->given() && !kv.quantized)
      fail("%s is the scale of an fp8 cache; k_cache.dtype is %s", name,
           to_string(a.k_cache.dtype));

  Operand q = operand_of("q", a.q, kQueryAxes, false);
  Operand k_cache = operand_of("k_cache", a.k_cache, kv.paged ? kPagedAxes : kCacheAxes, appends);
  Operand v_cache =
      operand_of("v_cache", a.v_cache, kv.paged ? kValuePagedAxes : kValueCacheAxes, appends);
  Operand o = operand_of("o", a.o, kOutputAxes, true);
  Operand lse = operand_of("lse", a.lse, true);
  Operand k_new = operand_of("k_new", a.k_new, kNewKeyAxes, false);
  Operand v_new = operand_of("v_new", a.v_new, kNewValueAxes, false);
  Operand seqlens = operand_of("cache_seqlens", a.cache_seqlens, kPerSequenceAxes);
  Operand table = operand_of("block_table", a.block_table, kBlockTableAxes);

  std::vector<Operand*> all = {&q, &k_cache, &v_cache, &o, &seqlens};
  if (has_lse) all.push_back(&lse);
  if (appends) all.insert(all.end(), {&k_new, &v_new});
  if (kv.paged) all.push_back(&table);
  HeadVectors heads(options, false);
  MaskOperands masks(options);
  all.insert(all.end(), heads.given.begin(), heads.given.end());
  all.insert(all.end(), masks.given.begin(), masks.given.end());
  Operand k_scale = operand_of("k_scale", a.k_scale, false);
  Operand v_scale = operand_of("v_scale", a.v_scale, false);
  std::vector<Operand*> scales;
  if (a.k_scale.given()) scales.push_back(&k_scale);
  if (a.v_scale.given()) scales.push_back(&v_scale);
  all.insert(all.end(), scales.begin(), scales.end());
  check_operands_agree(all, dtypes, options, q);
  for (const Operand* op : heads.given) check_head_vector_shape(*op, q);
  for (const Operand* op : scales)
    if (op->rank != 1 || (op->shape[0] != 1 && op->shape[0] != k_cache.shape[2]))
      fail("%s must be [1] or [heads_kv = %lld]: one scale, or one per key/value head", op->name,
           ll(k_cache.shape[2]));
  check_vector(seqlens);

  // heads_kv = 0 divides only heads_q = 0.
  if (k_cache.shape[2] == 0 ? q.shape[2] != 0 : q.shape[2] % k_cache.shape[2] != 0)
    fail("k_cache.shape[2] (heads_kv = %lld) must divide q.shape[2] (heads_q = %lld)",
         ll(k_cache.shape[2]), ll(q.shape[2]));
  check_extent(k_cache, 3, q, 3);  // dim_qk
  for (int axis = 0; axis < 3; ++axis) check_extent(v_cache, axis, k_cache, axis);
  for (int axis = 0; axis < 3; ++axis) check_extent(o, axis, q, axis);
  check_extent(o, 3, v_cache, 3);  // dim_v
  if (has_lse) {
    check_extent(lse, 0, q, 0);
    check_extent(lse, 1, q, 2);
    check_extent(lse, 2, q, 1);
  }
  check_extent(seqlens, 0, q, 0);
  if (kv.paged) {
    check_extent(table, 0, q, 0);
    kv.page_size = k_cache.shape[1];
    if (kv.page_size == 0 || kv.page_size % kPageSizeMultiple != 0)
      fail("k_cache.shape[1] (page_size = %lld) must be a positive multiple of %lld for a paged "
           "cache",
           ll(kv.page_size), ll(kPageSizeMultiple));
    kv.capacity = table.shape[1] * kv.page_size;
  } else {
    check_extent(k_cache, 0, q, 0);
    kv.capacity = k_cache.shape[1];
  }
  if (appends) {
    check_extent(k_new, 0, q, 0);
    check_extent(k_new, 2, k_cache, 2);
    check_extent(k_new, 3, k_cache, 3);
    for (int axis = 0; axis < 3; ++axis) check_extent(v_new, axis, k_new, axis);
    check_extent(v_new, 3, v_cache, 3);
    kv.seq_new = k_new.shape[1];
  }
  check_outputs_do_not_overlap({all.begin(), all.end()});

  kv.base = problem_from(a.q, a.k_cache, a.v_cache, options);  // seq_kv: per sequence

  // On the GPU the kernels read the indices (nothing waits for them: the
  // call can be captured in a CUDA graph) unless the caller asks for them
  // to be checked here, as host tensors' are.
  if (a.q.memory == MemoryKind::host) {
    kv.cache_lengths = read_cache_lengths(a, kv);
  } else if (a.check_indices) {
    check_cuda_reachable(kv.base, a.q);  // before device memory is read
    std::vector<std::int32_t> lengths, table;
    KVCacheForwardArgs host = a;
    host.cache_seqlens = readable_on_host(a.cache_seqlens, lengths, options.stream);
    if (kv.paged) host.block_table = readable_on_host(a.block_table, table, options.stream);
    read_cache_lengths(host, kv);
  }
  return kv;
}

}  // namespace flashgen::api
