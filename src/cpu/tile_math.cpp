// tile_math.hpp's functions, forwarded to the kernels of the instruction
// set chosen once per process (isa_dispatch.hpp).
#include "cpu/tile_math.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cpu/isa_dispatch.hpp"
#include "cpu/tile_kernels.hpp"

namespace flashgen::cpu {

std::vector<const TileKernels*> runnable_tile_kernels() {
  std::vector<const TileKernels*> tables = {&generic_tile_kernels()};
  // avx512_bf16 ranks below avx512 where vdpbf16ps does no more multiply-adds
  // per cycle than fp32 FMAs (Intel: its operands must be packed, which costs
  // what it saves; docs/experiments.md), above it where it does twice as
  // many (AMD). Its table is avx512's with bf16 GEMMs added, so fp32 inputs
  // run the same code under either name.
  const bool bf16_first = bf16_dot_outpaces_fma();
  const TileKernels* bf16 = avx512_bf16_tile_kernels();
  const TileKernels* fp32 = avx512_tile_kernels();
  for (const TileKernels* table : {avx2_tile_kernels(), bf16_first ? fp32 : bf16,
                                   bf16_first ? bf16 : fp32, amx_tile_kernels()}) {
    if (table != nullptr) tables.push_back(table);
  }
  return tables;
}

const TileKernels* runnable_tile_kernels_named(const std::string& name) {
  for (const TileKernels* table : runnable_tile_kernels()) {
    if (name == table->name) return table;
  }
  return nullptr;
}

IsaChoice choose_tile_kernels(const char* requested) {
  const TileKernels* best = runnable_tile_kernels().back();
  if (requested == nullptr || *requested == '\0') return {best, {}};
  if (const TileKernels* named = runnable_tile_kernels_named(requested)) return {named, {}};
  return {best, std::string("flashgen: ") + kIsaEnvironmentVariable + "=" + requested +
                    " is not an instruction set this build and CPU run; using " + best->name};
}

namespace {

std::atomic<const TileKernels*>& active_slot() {
  static std::atomic<const TileKernels*> slot{[] {
    const IsaChoice choice = choose_tile_kernels(std::getenv(kIsaEnvironmentVariable));
    if (!choice.warning.empty()) std::fprintf(stderr, "%s\n", choice.warning.c_str());
    return choice.kernels;
  }()};
  return slot;
}

}  // namespace

const TileKernels& active_tile_kernels() { return *active_slot().load(std::memory_order_relaxed); }

void set_active_tile_kernels(const TileKernels& kernels) {
  active_slot().store(&kernels, std::memory_order_relaxed);
}

void gemm_nn(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
             int ldc, bool accumulate) {
  active_tile_kernels().gemm_nn(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void gemm_bf16(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
               int ldc, bool accumulate) {
  const TileKernels& kernels = active_tile_kernels();
  const auto gemm = kernels.gemm_bf16 != nullptr ? kernels.gemm_bf16 : kernels.gemm_nn;
  gemm(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

bool has_packed_bf16_gemm() { return active_tile_kernels().gemm_bf16_packed != nullptr; }

void pack_bf16_a(int m, int k, const float* a, int lda, std::uint16_t* out) {
  active_tile_kernels().pack_bf16_a(m, k, a, lda, out);
}

void pack_bf16_b(int k, int n, const float* b, int ldb, std::uint16_t* out) {
  active_tile_kernels().pack_bf16_b(k, n, b, ldb, out);
}

void gemm_bf16_packed(int m, int n, int k, const std::uint16_t* a, const std::uint16_t* b,
                      int b_pitch, float* c, int ldc, bool accumulate) {
  active_tile_kernels().gemm_bf16_packed(m, n, k, a, b, b_pitch, c, ldc, accumulate);
}

void* tile_scratch(int slot, long bytes) {
  constexpr int kSlots = 4;
  constexpr std::size_t kAlignment = 64;
  struct Buffer {
    std::unique_ptr<unsigned char[]> storage;
    std::size_t size = 0;
  };
  thread_local Buffer buffers[kSlots];
  Buffer& buffer = buffers[slot];
  const std::size_t needed = static_cast<std::size_t>(bytes) + kAlignment;
  if (buffer.size < needed) {
    buffer.storage = std::make_unique<unsigned char[]>(needed);
    buffer.size = needed;
  }
  void* p = buffer.storage.get();
  std::size_t space = buffer.size;
  return std::align(kAlignment, static_cast<std::size_t>(bytes), p, space);
}

void exp2_inplace(float* x, int n) { active_tile_kernels().exp2_inplace(x, n); }

float online_softmax_row(float* scores, int n, int visible_begin, int visible_end,
                         float scale_log2, float& row_max, float& row_sum) {
  return active_tile_kernels().online_softmax_row(scores, n, visible_begin, visible_end,
                                                  scale_log2, row_max, row_sum);
}

float online_softmax_row_bf16(const float* scores, int n, int visible_begin, int visible_end,
                              float scale_log2, float& row_max, float& row_sum, std::uint16_t* p) {
  return active_tile_kernels().online_softmax_row_bf16(scores, n, visible_begin, visible_end,
                                                       scale_log2, row_max, row_sum, p);
}

void probabilities_row(float* scores, int n, int visible_begin, int visible_end,
                       float scale_log2, float row_lse_log2) {
  active_tile_kernels().probabilities_row(scores, n, visible_begin, visible_end, scale_log2,
                                          row_lse_log2);
}

void probabilities_row_by_column(float* scores, int n, int visible_begin, int visible_end,
                                 float scale_log2, const float* column_lse_log2) {
  active_tile_kernels().probabilities_row_by_column(scores, n, visible_begin, visible_end,
                                                    scale_log2, column_lse_log2);
}

void score_gradient_row(const float* p, float* dp, int n, float row_d) {
  active_tile_kernels().score_gradient_row(p, dp, n, row_d);
}

void score_gradient_row_by_column(const float* p, float* dp, int n, const float* column_d) {
  active_tile_kernels().score_gradient_row_by_column(p, dp, n, column_d);
}

float dot(const float* x, const float* y, int n) { return active_tile_kernels().dot(x, y, n); }

void scale_inplace(float* x, int n, float factor) {
  active_tile_kernels().scale_inplace(x, n, factor);
}

void transpose_16x16(const float* src, int lds, float* dst, int ldd) {
  active_tile_kernels().transpose_16x16(src, lds, dst, ldd);
}

}  // namespace flashgen::cpu
