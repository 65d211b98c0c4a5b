// Bad input to the varlen and KV-cache calls: each broken rule is refused
// with invalid_argument (or unsupported for CUDA memory) and a message that
// names the argument and the rule, before anything is read or written.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/cuda_backend.hpp"
#include "fails_with.hpp"
#include "flashgen/sequences.hpp"

namespace flashgen {
namespace {

// Host buffers large enough for the shapes below (values never matter: each
// call fails before it computes).
struct Buffers {
  std::vector<std::uint16_t> q = std::vector<std::uint16_t>(4096), k = q, v = q, o = q, kc = q,
                             vc = q, kn = q, vn = q;
  std::vector<float> lse = std::vector<float>(1024);
};

using testing::fails_with;

struct Varlen {
  Buffers buffers;
  std::vector<std::int32_t> cu_q = {0, 3, 3, 8}, cu_k = {0, 4, 6, 8};
  VarlenForwardArgs args() {
    VarlenForwardArgs a;
    a.q = packed_tokens(buffers.q.data(), DType::bf16, 8, 2, 16);
    a.k = packed_tokens(buffers.k.data(), DType::bf16, 8, 1, 16);
    a.v = packed_tokens(buffers.v.data(), DType::bf16, 8, 1, 16);
    a.o = packed_tokens(buffers.o.data(), DType::bf16, 8, 2, 16);
    a.lse = RowStatsView::contiguous(buffers.lse.data(), 1, 2, 8);
    a.cu_seqlens_q = IndexView::vector(cu_q.data(), 4);
    a.cu_seqlens_k = IndexView::vector(cu_k.data(), 4);
    a.max_seqlen_q = 5, a.max_seqlen_k = 4;
    return a;
  }
};

TEST(ValidateVarlen, RefusesOffsetsThatAreNotCumulativeLengths) {
  Varlen t;
  EXPECT_NO_THROW(forward_varlen(t.args()));
  t.cu_q = {0, 3, 2, 8};
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument,
                         "cu_seqlens_q must be non-decreasing: cu_seqlens_q[2] (2) < "
                         "cu_seqlens_q[1] (3)",
                         [&] { forward_varlen(t.args()); }));
  t.cu_q = {0, 3, 3, 7};
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "cu_seqlens_q[3] (7) must equal q's length (8)",
                         [&] { forward_varlen(t.args()); }));
  t.cu_q = {1, 3, 3, 8};
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "cu_seqlens_q[0] (1) must be 0",
                         [&] { forward_varlen(t.args()); }));
  t.cu_q = {0, 3, 3, 8};
  t.cu_k = {0, 4, 6, 9};
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "cu_seqlens_k[3] (9) must equal k's length",
                         [&] { forward_varlen(t.args()); }));
}

TEST(ValidateVarlen, RefusesShapesAndLimits) {
  Varlen t;
  VarlenForwardArgs a = t.args();
  a.max_seqlen_q = 4;
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument,
                         "max_seqlen_q (4) must be >= every sequence's length: sequence 2 has 5",
                         [&] { forward_varlen(a); }));
  a = t.args();
  a.cu_seqlens_k = IndexView::vector(t.cu_k.data(), 3);
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "cu_seqlens_k.shape[0] (batch + 1 = 3) must equal cu_seqlens_q.shape[0]",
                         [&] { forward_varlen(a); }));
  a = t.args();
  a.q = TensorView::bshd(t.buffers.q.data(), DType::bf16, 2, 4, 2, 16);
  a.k = TensorView::bshd(t.buffers.k.data(), DType::bf16, 2, 4, 1, 16);
  a.v = TensorView::bshd(t.buffers.v.data(), DType::bf16, 2, 4, 1, 16);
  a.o = TensorView::bshd(t.buffers.o.data(), DType::bf16, 2, 4, 2, 16);
  a.lse = RowStatsView::contiguous(t.buffers.lse.data(), 2, 2, 4);
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "q.shape[0] (batch = 2) must be 1",
                         [&] { forward_varlen(a); }));
}

// Where the CUDA backend cannot run, CUDA tensors are refused with the
// reason before their memory (cu_seqlens) is read; tests/gpu runs them.
TEST(ValidateVarlen, CudaTensorsWithoutAUsableGpuAreRefusedBeforeAnythingIsRead) {
  if (cuda::availability().ok) GTEST_SKIP() << "a GPU is usable here: tests/gpu/varlen_gpu_test.cpp";
  Varlen t;
  VarlenForwardArgs a = t.args();
  for (TensorView* view : {&a.q, &a.k, &a.v, &a.o}) view->memory = MemoryKind::cuda;
  a.lse.memory = a.cu_seqlens_q.memory = a.cu_seqlens_k.memory = MemoryKind::cuda;
  EXPECT_TRUE(fails_with(ErrorCode::unsupported, "the CUDA backend cannot run here",
                         [&] { forward_varlen(a); }));
}

// Offsets in device memory live with the tensors; host offsets serve any.
TEST(ValidateVarlen, DeviceOffsetsMustLiveWithTheTensors) {
  Varlen t;
  VarlenForwardArgs a = t.args();
  a.cu_seqlens_q.memory = MemoryKind::cuda;
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument,
                         "cu_seqlens_q.memory (cuda) must equal q.memory (host)",
                         [&] { forward_varlen(a); }));
}

struct Paged {
  Buffers buffers;
  std::vector<std::int32_t> seqlens = {3, 20}, table = {2, 0, 1, 3};
  KVCacheForwardArgs args(std::int64_t page_size = 16) {
    KVCacheForwardArgs a;
    a.q = TensorView::bshd(buffers.q.data(), DType::bf16, 2, 1, 2, 16);
    a.k_cache = TensorView::bshd(buffers.kc.data(), DType::bf16, 4, page_size, 1, 16);
    a.v_cache = TensorView::bshd(buffers.vc.data(), DType::bf16, 4, page_size, 1, 16);
    a.cache_seqlens = IndexView::vector(seqlens.data(), 2);
    a.block_table = IndexView::matrix(table.data(), 2, 2);
    a.k_new = TensorView::bshd(buffers.kn.data(), DType::bf16, 2, 1, 1, 16);
    a.v_new = TensorView::bshd(buffers.vn.data(), DType::bf16, 2, 1, 1, 16);
    a.o = TensorView::bshd(buffers.o.data(), DType::bf16, 2, 1, 2, 16);
    return a;
  }
};

// fp8 caches: both caches e4m3 or neither, scales only with them and of
// [1] or [heads_kv]; e4m3 nowhere else.
TEST(ValidateKVCache, Fp8CachesAndTheirScales) {
  Paged t;
  KVCacheForwardArgs a = t.args();
  a.k_cache.dtype = a.v_cache.dtype = DType::e4m3;
  std::vector<float> scales = {0.5f, 2.0f};
  a.k_scale = HeadVectorView::heads(scales.data(), 1);
  a.v_scale = HeadVectorView::heads(scales.data() + 1, 1);
  EXPECT_NO_THROW(forward_with_kvcache(a));
  KVCacheForwardArgs mixed = a;
  mixed.v_cache.dtype = DType::bf16;
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument,
                         "v_cache.dtype (bf16) must equal k_cache.dtype (e4m3)",
                         [&] { forward_with_kvcache(mixed); }));
  KVCacheForwardArgs two = a;
  two.k_scale = HeadVectorView::heads(scales.data(), 2);  // heads_kv = 1
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "k_scale must be [1] or [heads_kv = 1]",
                         [&] { forward_with_kvcache(two); }));
  KVCacheForwardArgs plain = t.args();
  plain.v_scale = a.v_scale;
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument,
                         "v_scale is the scale of an fp8 cache; k_cache.dtype is bf16",
                         [&] { forward_with_kvcache(plain); }));
  KVCacheForwardArgs q8 = a;
  q8.q.dtype = DType::e4m3;
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "q.dtype (e4m3) stores a KV cache only",
                         [&] { forward_with_kvcache(q8); }));
}

TEST(ValidateKVCache, RefusesBlockTableEntriesOutsideThePages) {
  Paged t;
  EXPECT_NO_THROW(forward_with_kvcache(t.args()));
  t.table = {2, 0, -1, 3};
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument,
                         "block_table[1][0] (-1) must be in [0, num_pages = 4)",
                         [&] { forward_with_kvcache(t.args()); }));
  t.table = {2, 9, 1, 3};  // sequence 0 (4 rows after the append) never reads its page 1
  EXPECT_NO_THROW(forward_with_kvcache(t.args()));
  t.table = {2, 0, 1, 4};
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "block_table[1][1] (4)",
                         [&] { forward_with_kvcache(t.args()); }));
}

TEST(ValidateKVCache, RefusesPageSizesAndLengthsOutOfRule) {
  Paged t;
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument,
                         "k_cache.shape[1] (page_size = 24) must be a positive multiple of 16",
                         [&] { forward_with_kvcache(t.args(24)); }));
  t.seqlens = {3, 32};
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument,
                         "cache_seqlens[1] (32) + the appended rows (seq_new = 1) must be <= the "
                         "cache's rows per sequence (32 = max_pages · page_size)",
                         [&] { forward_with_kvcache(t.args()); }));
  t.seqlens = {-1, 3};
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "cache_seqlens[0] (-1) must be >= 0",
                         [&] { forward_with_kvcache(t.args()); }));
  t.seqlens = {3, 3};
  KVCacheForwardArgs a = t.args();
  a.v_new.data = nullptr;  // still appends: k_new is given
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "v_new.data is null",
                         [&] { forward_with_kvcache(a); }));
  a = t.args();
  a.o = a.k_cache;  // the output would overwrite the cache
  a.o.shape[0] = 2, a.o.shape[1] = 1, a.o.shape[2] = 2;
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "overlaps",
                         [&] { forward_with_kvcache(a); }));
}

// On CUDA tensors the kernels read the indices (nothing is read on the
// host); what they do not run is refused by name before any device memory
// is touched, on any machine.
TEST(ValidateKVCache, TheCudaBackendRefusesWhatItsKernelsLackByName) {
  Paged t;
  KVCacheForwardArgs a = t.args();
  for (TensorView* view : {&a.q, &a.k_cache, &a.v_cache, &a.k_new, &a.v_new, &a.o}) {
    view->memory = MemoryKind::cuda;
    view->dtype = DType::f32;
  }
  a.cache_seqlens.memory = a.block_table.memory = MemoryKind::cuda;
  EXPECT_TRUE(fails_with(ErrorCode::unsupported,
                         "forward_with_kvcache with float32 tensors: not supported by the CUDA "
                         "backend yet",
                         [&] { forward_with_kvcache(a, {}); }));
}

// ALiBi slopes of rank 2 have a row per sequence (not per row of the packed
// tensors' batch of one); another count is refused by name.
TEST(ValidateVarlen, SlopesOfRankTwoHaveARowPerSequence) {
  Varlen t;
  std::vector<float> slopes(8, 0.5f);
  Options options;
  options.alibi_slopes = HeadVectorView::batch_heads(slopes.data(), 3, 2);
  EXPECT_NO_THROW(forward_varlen(t.args(), options));
  options.alibi_slopes = HeadVectorView::batch_heads(slopes.data(), 4, 2);
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument,
                         "options.alibi_slopes.shape[0] (4) must equal the number of sequences (3",
                         [&] { forward_varlen(t.args(), options); }));
  options.alibi_slopes = HeadVectorView::batch_heads(slopes.data(), 1, 2);
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "the number of sequences (3",
                         [&] { forward_varlen(t.args(), options); }));
  options.alibi_slopes = HeadVectorView::heads(slopes.data(), 2);
  EXPECT_NO_THROW(forward_varlen(t.args(), options));
}

TEST(ValidateKVCache, PerHeadVectorsAreCheckedAgainstTheSequences) {
  Paged t;
  std::vector<float> sinks(2, 1.0f), slopes(6, 0.5f);
  Options options;
  options.sinks = HeadVectorView::heads(sinks.data(), 2);
  EXPECT_NO_THROW(forward_with_kvcache(t.args(), options));
  options.sinks = HeadVectorView::heads(sinks.data(), 1);
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "options.sinks.shape[0]",
                         [&] { forward_with_kvcache(t.args(), options); }));
  options.sinks = {};
  options.alibi_slopes = HeadVectorView::batch_heads(slopes.data(), 2, 2);  // a row per sequence
  EXPECT_NO_THROW(forward_with_kvcache(t.args(), options));
  options.alibi_slopes = HeadVectorView::batch_heads(slopes.data(), 3, 2);
  EXPECT_TRUE(fails_with(ErrorCode::invalid_argument, "options.alibi_slopes.shape[0]",
                         [&] { forward_with_kvcache(t.args(), options); }));
}

}  // namespace
}  // namespace flashgen
