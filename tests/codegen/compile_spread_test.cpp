// NVRTC compiles every generated kernel kind for a spread of head dimensions
// on sm_80 and sm_90a, without a GPU: a compile error or a local-memory spill
// in a default configuration fails CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "codegen/generate.hpp"
#include "codegen/heuristics.hpp"
#include "codegen/forward_schedule.hpp"
#include "codegen/user_mask.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/runtime/runtime.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen {
namespace {

struct SpreadCase {
  KernelKind kind;
  int dim;
  DType dtype;
  bool causal;
  std::string arch;
  int vec;
  bool split_keys = false;
  // The mask's left diagonal and the score modifiers (sinks: the forward only).
  bool window = false, softcap = false, sinks = false, alibi = false;
  // A user mask: 0 none; 1 documents, a float array and a select (int32 and
  // fp32 reads); 2 divisions and a computed index (the checked operations).
  int mask = 0;
  KeyCache cache = KeyCache::none;  // the split-key forward over a KV cache
  bool fp8_cache = false;           // ... of e4m3 bytes
  bool varlen = false;              // packed sequences (the backward copied without TMA)
  bool chunked = false;             // the split-key forward's four warps (chunked prefill)
};

const char* const kSpreadMasks[] = {
    "",
    "(doc[kv_idx] == doc[q_idx]) && (bias[h] >= 0.0 ? kv_idx % 3 != 1 : q_idx - kv_idx < 40)",
    "kv_idx < 10 ? 1 : doc[(kv_idx - 10) / 2] * 2.5 - h > q_idx % (b + 2)",
};

std::string name_of(const SpreadCase& c) {
  std::string name = std::string(to_string(c.kind)) + "_d" + std::to_string(c.dim) + "_" +
                     to_string(c.dtype) + (c.causal ? "_causal_" : "_") + c.arch + "_vec" +
                     std::to_string(c.vec) + (c.split_keys ? "_split_keys" : "") +
                     (c.window ? "_window" : "") + (c.softcap ? "_softcap" : "") +
                     (c.sinks ? "_sinks" : "") + (c.alibi ? "_alibi" : "") +
                     (c.mask ? "_mask" + std::to_string(c.mask) : "") +
                     (c.cache != KeyCache::none ? std::string("_cache_") + to_string(c.cache) : "") +
                     (c.fp8_cache ? "_e4m3" : "") + (c.varlen ? "_varlen" : "") +
                     (c.chunked ? "_chunked" : "");
  return name;
}

void PrintTo(const SpreadCase& c, std::ostream* os) { *os << name_of(c); }

// NVRTC compiles `g` for `arch` with no spill and no stack frame. False
// where NVRTC is missing (the caller skips).
bool compiles_without_spills(const GeneratedKernel& g, const std::string& arch) {
  cuda::CompiledKernel compiled;
  try {
    compiled = cuda::compile_only({g.name, g.source, g.entry, arch, {}});
  } catch (const Error& e) {
    if (e.code() == ErrorCode::unsupported) return false;
    ADD_FAILURE() << g.name << ":\n" << e.what();
    return true;
  }
  EXPECT_EQ(compiled.resources.spill_store_bytes, 0) << g.name << "\n" << compiled.log;
  EXPECT_EQ(compiled.resources.spill_load_bytes, 0) << g.name << "\n" << compiled.log;
  EXPECT_EQ(compiled.resources.stack_frame_bytes, 0) << g.name << "\n" << compiled.log;
  EXPECT_GT(compiled.resources.registers, 0) << g.name;
  return true;
}

// Every dimension of the contract's spread with every kind on both archs;
// dtype, causal and alignment class rotate so each value is covered at
// several dimensions without a full cross product.
std::vector<SpreadCase> spread() {
  const int dims[] = {1, 3, 40, 64, 127, 128, 199, 256, 257, 385, 512};
  const KernelKind kinds[] = {KernelKind::forward, KernelKind::backward_query,
                              KernelKind::backward_key_value, KernelKind::backward_atomic};
  const int vecs[] = {8, 1, 4, 0};
  std::vector<SpreadCase> cases;
  int i = 0;
  for (int dim : dims)
    for (const char* arch : {"sm_80", "sm_90a"})
      for (KernelKind kind : kinds) {
        cases.push_back({kind, dim, i % 2 ? DType::f16 : DType::bf16, (i / 2) % 2 == 1, arch,
                         vecs[(i / 3) % 4]});
        ++i;
      }
  // The wgmma forward (sm_90a, 16-byte aligned rows) at the widths of its
  // wgmma n: S (cols) and O (Dv) from 16 to 256.
  int w = 0;
  for (int dim : {8, 40, 64, 72, 128, 200, 256})
    cases.push_back({KernelKind::forward, dim, w % 2 ? DType::f16 : DType::bf16, (w++ / 2) % 2 == 1,
                     "sm_90a", 8});
  // ... and with 8- and 4-byte copies for rows aligned to 8 or 4 bytes.
  cases.push_back({KernelKind::forward, 68, DType::bf16, false, "sm_90a", 4});
  cases.push_back({KernelKind::forward, 130, DType::f16, true, "sm_90a", 2});
  // Token rows widening a head's value tile past 256 columns: one CTA, O in
  // two products (up to 288 columns).
  cases.push_back({KernelKind::forward, 249, DType::f16, true, "sm_90a", 1});
  cases.push_back({KernelKind::forward, 257, DType::bf16, false, "sm_90a", 1});
  cases.push_back({KernelKind::forward, 271, DType::bf16, true, "sm_90a", 1});
  for (KernelKind kind :
       {KernelKind::backward_prepare, KernelKind::convert_grad_q, KernelKind::forward_combine,
        KernelKind::backward_sinks})
    cases.push_back({kind, 127, DType::bf16, false, "sm_90a", 1});
  // The split-key forward (decode) and its combine, from narrow to chunked heads.
  int s = 0;
  for (int dim : {1, 64, 127, 128, 256, 512}) {
    cases.push_back({KernelKind::forward, dim, s % 2 ? DType::f16 : DType::bf16, false,
                     s % 3 ? "sm_90a" : "sm_80", dim % 8 ? 1 : 8, true});
    cases.push_back({KernelKind::forward_combine, dim, DType::bf16, false, "sm_90a", 8});
    ++s;
  }
  // Windows (both diagonals), soft caps, sinks and ALiBi on every kind the planner
  // picks for them, both archs, narrow to wide heads.
  int m = 0;
  for (int dim : {40, 64, 127, 128, 256, 385})
    for (const char* arch : {"sm_80", "sm_90a"})
      for (KernelKind kind : {KernelKind::forward, KernelKind::backward_query,
                              KernelKind::backward_key_value, KernelKind::backward_atomic}) {
        SpreadCase c{kind, dim, m % 2 ? DType::f16 : DType::bf16, true, arch, dim % 8 ? 1 : 8};
        c.window = true;
        c.softcap = m++ % 3 != 0;
        c.sinks = kind == KernelKind::forward && !c.softcap;
        c.alibi = !c.softcap;
        cases.push_back(c);
      }
  // User masks on every kind that evaluates them, the split-key forward and
  // fp32 included, both archs.
  int u = 0;
  for (int dim : {40, 128, 256, 385})
    for (const char* arch : {"sm_80", "sm_90a"})
      for (KernelKind kind : {KernelKind::forward, KernelKind::backward_query,
                              KernelKind::backward_key_value, KernelKind::backward_atomic}) {
        SpreadCase c{kind, dim, u % 2 ? DType::f16 : DType::bf16, u % 3 == 0, arch, 8};
        c.mask = 1 + u++ % 2;
        c.window = u % 4 == 0;
        cases.push_back(c);
      }
  for (int mask : {1, 2}) {
    SpreadCase blocks{KernelKind::mask_blocks, 64, DType::bf16, mask == 1, "sm_90a", 8};
    blocks.mask = mask;
    cases.push_back(blocks);
    SpreadCase decode{KernelKind::forward, 128, DType::bf16, false, "sm_90a", 8, true};
    decode.mask = mask;
    cases.push_back(decode);
    for (KernelKind kind :
         {KernelKind::forward, KernelKind::backward_query, KernelKind::backward_key_value}) {
      SpreadCase f32{kind, 72, DType::f32, mask == 2, "sm_90a", 4};
      f32.mask = mask;
      cases.push_back(f32);
    }
  }
  // The split-key forward over a KV cache, contiguous and paged, every
  // alignment class's copies, with the masks and modifiers a cache takes.
  int k = 0;
  for (int dim : {40, 64, 127, 128, 199, 256, 512})
    for (KeyCache cache : {KeyCache::contiguous, KeyCache::paged}) {
      SpreadCase c{KernelKind::forward, dim, k % 2 ? DType::f16 : DType::bf16, k % 3 == 0,
                   k % 4 == 3 ? "sm_80" : "sm_90a", dim % 8 ? 1 : (k % 5 == 3 ? 0 : 8), true};
      c.cache = cache;
      c.window = k % 3 == 1;
      c.softcap = k % 4 == 1;
      c.alibi = k++ % 4 == 2;
      cases.push_back(c);
      // fp8: every alignment class's converting copy, both archs' conversions.
      c.fp8_cache = true;
      c.vec = dim % 8 ? 1 : (k % 3 == 2 ? 0 : 8);
      cases.push_back(c);
      // A chunked prefill's four warps (cuda::tuning_of past 32 query rows).
      if (dim == 40 || dim == 128 || dim == 256 || dim == 512) {
        c.chunked = true;
        c.fp8_cache = cache == KeyCache::paged;
        c.mask = dim == 128 ? 1 : 0;  // a user mask's cells per entry
        cases.push_back(c);
      }
    }
  // Packed sequences: the three tile kernels narrow to wide, every
  // alignment class, both archs, fp32, with the masks and modifiers.
  int v = 0;
  for (int dim : {1, 40, 64, 127, 128, 199, 256, 385, 512})
    for (KernelKind kind :
         {KernelKind::forward, KernelKind::backward_query, KernelKind::backward_key_value}) {
      SpreadCase c{kind, dim, v % 5 == 4 ? DType::f32 : (v % 2 ? DType::f16 : DType::bf16),
                   v % 3 != 1, v % 4 == 3 ? "sm_80" : "sm_90a", dim % 8 ? 1 : (v % 7 == 5 ? 4 : 8)};
      c.varlen = true;
      c.window = v % 4 == 1;
      c.softcap = v % 3 == 2;
      c.alibi = v % 5 == 1;
      c.sinks = kind == KernelKind::forward && v % 2 == 0;
      c.mask = dim == 128 || dim == 385 ? 1 + v % 2 : 0;
      cases.push_back(c);
      ++v;
    }
  SpreadCase combine_with_sinks{KernelKind::forward_combine, 128, DType::bf16, false, "sm_90a", 8};
  combine_with_sinks.sinks = true;
  cases.push_back(combine_with_sinks);
  cases.push_back({KernelKind::backward_sinks, 64, DType::f32, false, "sm_90a", 8});
  // The fp32 kernels (forward and the deterministic backward) on both archs.
  int f = 0;
  for (int dim : {1, 40, 127, 257, 512})
    for (const char* arch : {"sm_80", "sm_90a"})
      for (KernelKind kind :
           {KernelKind::forward, KernelKind::backward_query, KernelKind::backward_key_value})
        cases.push_back({kind, dim, DType::f32, (f++ / 3) % 2 == 1, arch, f % 2 ? 4 : 0});
  return cases;
}

class CompileSpread : public ::testing::TestWithParam<SpreadCase> {};

TEST_P(CompileSpread, CompilesWithoutSpills) {
  const SpreadCase& c = GetParam();
  KernelSpec spec;
  spec.kind = c.kind;
  spec.dtype = c.dtype;
  spec.dim_qk = c.dim;
  spec.dim_v = c.dim;
  spec.causal = c.causal;
  spec.vec = c.vec;
  spec.arch = c.arch;
  spec.split_keys = c.split_keys;
  spec.window = c.window;
  spec.softcap = c.softcap;
  spec.sinks = c.sinks;
  spec.alibi = c.alibi;
  spec.cache = c.cache;
  spec.fp8_cache = c.fp8_cache;
  spec.varlen = c.varlen;
  if (c.mask > 0) {
    const std::vector<mask::ArrayName> arrays = {{"doc", false}, {"bias", true}};
    spec.mask_mod = mask::Expression::parse(kSpreadMasks[c.mask], arrays).canonical();
    spec.mask_arrays = mask_arrays_text(arrays);
  }
  // The tuning a call gets without a table row: the default, walking its
  // tiles wherever the walk can run (calls walk on short problems), its
  // warpgroups taking turns wherever they can.
  // Packed sequences' backward kernels then without TMA (cuda::tuning_of).
  const std::size_t limit = shared_limit_of_arch(c.arch);
  TuningParams tuning =
      with_gemm_turns(spec, with_persistent_tiles(spec, default_tuning(spec, limit), limit));
  if (c.varlen && c.kind != KernelKind::forward) tuning = tuning_without_tma(spec, tuning, limit);
  // The split-key forward's four warps (cuda::tuning_of): a chunked
  // prefill's, an fp8 cache's over 32-key blocks. A decode step over an
  // fp8 cache: four warps sharing one 16-row tile, 64-key blocks in 3
  // stages (kernel_choice.cpp's first fp8 shape), 2 where 3 do not fit
  // (its next one: the converting copy's tiles at large D).
  if (c.chunked) {
    tuning.block_rows *= 4, tuning.warps *= 4;
    if (c.fp8_cache) tuning.block_cols = std::min(tuning.block_cols, 32);
  } else if (c.fp8_cache) {
    tuning.block_cols = 64, tuning.warps = 4, tuning.stages = 3;
    tuning.split = WarpgroupSplit::keys;
    if (generate(spec, tuning).shared_bytes > limit) tuning.stages = 2;
  }
  const GeneratedKernel g = generate(spec, tuning);
  EXPECT_LE(g.shared_bytes, limit) << g.name;
  if (!compiles_without_spills(g, c.arch)) GTEST_SKIP() << "NVRTC not available";
}

INSTANTIATE_TEST_SUITE_P(Spread, CompileSpread, ::testing::ValuesIn(spread()),
                         [](const ::testing::TestParamInfo<SpreadCase>& info) {
                           return name_of(info.param);
                         });

// Shapes of the wgmma kernels that only tuning rows or FLASHGEN_TUNING
// choose (the key/value backward, deeper forward pipelines, ...) must still
// compile without spills at the dims they serve.
TEST(CompileWgmmaOptIn, CandidatesCompileWithoutSpills) {
  struct Shape {
    KernelKind kind;
    int dim, rows, cols;
    bool causal;
    DType dtype;
    int vec;
    int stages = 0;
    bool producer = false;
    bool tma = false;
    WarpgroupSplit split = WarpgroupSplit::rows;
    unsigned cached = 0;  // operands held in registers
  };
  const WarpgroupSplit dims = WarpgroupSplit::dims, outputs = WarpgroupSplit::outputs;
  const KernelKind query = KernelKind::backward_query, key_value = KernelKind::backward_key_value;
  const unsigned kv_held = kCacheK | kCacheV, query_held = kCacheQ | kCacheGradO;
  for (const Shape& c : {Shape{query, 64, 192, 64, true, DType::bf16, 8},
                         Shape{query, 128, 128, 64, false, DType::f16, 8},
                         Shape{query, 250, 128, 32, true, DType::bf16, 2},
                         Shape{key_value, 40, 128, 64, true, DType::bf16, 8},
                         Shape{key_value, 64, 128, 64, false, DType::f16, 8},
                         Shape{key_value, 68, 128, 32, true, DType::bf16, 4},
                         Shape{key_value, 128, 128, 32, false, DType::bf16, 8},
                         Shape{key_value, 128, 128, 64, true, DType::f16, 2},
                         Shape{KernelKind::forward, 384, 128, 32, true, DType::bf16, 8},
                         Shape{KernelKind::forward, 512, 128, 32, false, DType::f16, 8},
                         Shape{KernelKind::forward, 127, 192, 64, true, DType::bf16, 1},
                         Shape{KernelKind::forward, 385, 128, 32, false, DType::bf16, 1},
                         Shape{query, 127, 128, 64, true, DType::bf16, 1},
                         Shape{query, 63, 192, 64, false, DType::f16, 1},
                         Shape{query, 199, 128, 32, false, DType::bf16, 1},
                         Shape{key_value, 127, 128, 64, true, DType::bf16, 1},
                         Shape{key_value, 63, 128, 64, false, DType::f16, 1},
                         Shape{KernelKind::forward, 64, 192, 128, false, DType::bf16, 8, 3},
                         Shape{KernelKind::forward, 128, 192, 64, true, DType::f16, 8, 3},
                         Shape{KernelKind::forward, 128, 192, 64, false, DType::bf16, 4, 4},
                         Shape{KernelKind::forward, 384, 128, 32, false, DType::bf16, 8, 3},
                         Shape{KernelKind::forward, 64, 192, 128, true, DType::bf16, 8, 0, true},
                         Shape{KernelKind::forward, 128, 192, 64, false, DType::f16, 8, 4, true},
                         Shape{KernelKind::forward, 68, 128, 64, true, DType::bf16, 4, 3, true},
                         Shape{KernelKind::forward, 256, 128, 32, false, DType::bf16, 8, 0, true},
                         Shape{key_value, 64, 128, 64, true, DType::bf16, 8, 0, true},
                         Shape{key_value, 128, 128, 32, false, DType::f16, 8, 0, true},
                         Shape{key_value, 68, 128, 32, false, DType::bf16, 4, 0, true},
                         Shape{query, 64, 192, 64, true, DType::bf16, 8, 0, true},
                         Shape{query, 128, 192, 48, false, DType::f16, 8, 0, true},
                         Shape{query, 250, 128, 32, true, DType::bf16, 2, 0, true},
                         Shape{KernelKind::forward, 64, 128, 128, false, DType::bf16, 8, 0, true, true},
                         Shape{KernelKind::forward, 72, 192, 64, true, DType::f16, 8, 0, true, true},
                         Shape{KernelKind::forward, 128, 192, 64, false, DType::bf16, 8, 0, true, true},
                         Shape{KernelKind::forward, 384, 128, 32, true, DType::bf16, 8, 0, true, true},
                         Shape{key_value, 64, 128, 64, true, DType::bf16, 8, 0, true, true},
                         Shape{key_value, 128, 128, 32, false, DType::f16, 8, 0, true, true},
                         Shape{key_value, 72, 192, 32, true, DType::bf16, 8, 0, true, true},
                         Shape{query, 64, 192, 64, true, DType::bf16, 8, 0, true, true},
                         Shape{query, 128, 128, 64, false, DType::f16, 8, 0, true, true},
                         Shape{query, 72, 128, 32, true, DType::bf16, 8, 0, true, true},
                         Shape{key_value, 256, 64, 64, false, DType::bf16, 8, 0, true, true, outputs},
                         Shape{key_value, 192, 64, 48, true, DType::f16, 8, 0, true, true, outputs},
                         Shape{key_value, 136, 64, 64, true, DType::bf16, 8, 0, true, true, outputs},
                         Shape{query, 384, 64, 16, false, DType::bf16, 8, 3, true, true, dims},
                         Shape{query, 512, 64, 16, true, DType::f16, 8, 3, true, true, dims},
                         Shape{query, 288, 64, 32, false, DType::bf16, 8, 3, true, true, dims},
                         Shape{key_value, 512, 64, 16, false, DType::bf16, 8, 2, true, true, dims},
                         Shape{key_value, 384, 64, 32, true, DType::bf16, 8, 2, true, true, dims},
                         Shape{key_value, 288, 64, 32, false, DType::f16, 8, 2, true, true, dims},
                         Shape{key_value, 288, 64, 32, true, DType::bf16, 8, 3, true, true, dims, kv_held},
                         Shape{key_value, 384, 64, 32, false, DType::bf16, 8, 3, true, true, dims, kCacheV},
                         Shape{key_value, 448, 64, 32, true, DType::f16, 8, 2, true, true, dims, kv_held},
                         Shape{key_value, 512, 64, 16, false, DType::bf16, 8, 3, true, true, dims, kv_held},
                         Shape{query, 384, 64, 16, false, DType::bf16, 8, 3, true, true, dims, query_held},
                         Shape{query, 384, 64, 32, true, DType::f16, 8, 3, true, true, dims, kCacheQ},
                         Shape{query, 512, 64, 16, false, DType::bf16, 8, 3, true, true, dims, kCacheQ},
                         Shape{query, 512, 64, 16, true, DType::bf16, 8, 3, true, true, dims, kCacheGradO},
                         Shape{key_value, 288, 64, 32, false, DType::bf16, 8, 3, true, true, dims, kv_held},
                         Shape{key_value, 320, 64, 32, true, DType::f16, 8, 3, true, true, dims, kv_held},
                         Shape{key_value, 384, 64, 16, false, DType::bf16, 8, 3, true, true, dims, kv_held},
                         // split=dims on token rows (odd dims past 256, widened tiles)
                         Shape{query, 385, 64, 32, false, DType::bf16, 1, 3, true, true, dims, kCacheQ},
                         Shape{query, 257, 64, 32, true, DType::f16, 1, 2, true, true, dims},
                         Shape{query, 386, 64, 16, true, DType::bf16, 2, 3, true, true, dims, kCacheGradO},
                         Shape{key_value, 385, 64, 32, false, DType::bf16, 1, 2, true, true, dims, kv_held},
                         Shape{key_value, 257, 64, 32, true, DType::bf16, 1, 3, true, true, dims},
                         Shape{key_value, 300, 64, 32, false, DType::f16, 4, 3, true, true, dims, kCacheK}}) {
    KernelSpec spec;
    spec.kind = c.kind;
    spec.dtype = c.dtype;
    spec.dim_qk = spec.dim_v = c.dim;
    spec.causal = c.causal;
    spec.vec = c.vec;
    // Value dims past 256 are split across CTAs of 256 columns (split=dims:
    // across the two warpgroups of one CTA of 64 rows, and for the key/value
    // kernel a dV and a dK CTA per key block; split=outputs: dK and dV, one
    // per warpgroup).
    const bool split = c.split != WarpgroupSplit::rows;
    TuningParams tuning{c.rows, c.cols, c.dim > 256 && !split ? 256 : 0, split ? 8 : c.rows / 16,
                        0};
    tuning.wgmma = true;
    tuning.stages = c.stages;
    tuning.producer = c.producer;
    tuning.tma = c.tma;
    tuning.split = c.split;
    tuning.cached = c.cached;
    const GeneratedKernel g = generate(spec, tuning);
    EXPECT_EQ(g.tensor_maps, c.tma) << g.name;
    EXPECT_LE(g.shared_bytes, shared_limit_of_arch(spec.arch)) << g.name;
    if (!compiles_without_spills(g, spec.arch)) GTEST_SKIP() << "NVRTC not available";
  }
}

// The shipped table's forward rows run with their warpgroups taking turns
// and, on short problems, walking their tiles (scheduled_as_run), which
// their rows do not say: each row compiles both ways without spills at the
// smallest dims it serves (once per dims, causal mask and tuning).
TEST(CompileTableRows, RowsCompileWithoutSpillsAsCallsRunThem) {
  const std::string arch = "sm_90a";
  const std::size_t limit = shared_limit_of_arch(arch);
  std::set<std::string> compiled;
  int walked = 0, turned = 0;
  for (const TuningRow& row : tuning_tables(arch)->shipped) {
    if (row.kind != KernelKind::forward) continue;
    KernelSpec spec;
    spec.dtype = row.dtype;
    spec.dim_qk = row.dim_qk_min;
    spec.dim_v = row.dim_v_min;
    spec.causal = row.causal;
    spec.vec = 8;
    spec.arch = arch;
    const TuningParams on_grid = with_gemm_turns(spec, row.tuning);
    const TuningParams walking =
        with_gemm_turns(spec, with_persistent_tiles(spec, row.tuning, limit));
    for (const TuningParams& run : {on_grid, walking}) {
      if (run == row.tuning) continue;
      const std::string key = std::to_string(spec.dim_qk) + "/" + std::to_string(spec.dim_v) +
                              (spec.causal ? " causal " : " ") + run.to_string();
      if (!compiled.insert(key).second) continue;
      walked += run.persistent;
      turned += run.pingpong;
      const GeneratedKernel g = generate(spec, run);
      if (!compiles_without_spills(g, arch)) GTEST_SKIP() << "NVRTC not available";
    }
  }
  EXPECT_GT(walked, 0) << "no shipped row walks its tiles";
  EXPECT_GT(turned, 0) << "no shipped row takes turns";
}

// What calls run beyond the tables' shapes (cuda::tuning_for): under a
// user mask a forward row of two warpgroups and a key/value row 16 keys
// narrower, under gpt-oss's window the query kernel's 64-row mma.sync
// blocks; each compiles without spills.
TEST(CompileTableRows, MaskedAndWindowedCallsCompileWithoutSpills) {
  const std::string arch = "sm_90a";
  const std::size_t limit = shared_limit_of_arch(arch);
  const std::vector<mask::ArrayName> arrays = {{"doc", false}};
  struct Call {
    KernelKind kind;
    int dim;
    bool mask;
    std::int64_t window_left;
    std::string expected;
  };
  const Call calls[] = {
      {KernelKind::forward, 128, false, -1, "rows=192 cols=80 head=0 warps=12"},
      {KernelKind::forward, 128, true, -1, "rows=128 cols=128 head=0 warps=8"},
      {KernelKind::backward_key_value, 128, false, -1, "rows=128 cols=64"},
      {KernelKind::backward_key_value, 128, true, -1, "rows=128 cols=48"},
      {KernelKind::backward_key_value, 256, true, -1, "rows=64 cols=64"},  // split=outputs
      {KernelKind::backward_query, 64, false, 128, "rows=64 cols=32 head=0 warps=4 cache=none"},
      {KernelKind::backward_query, 128, false, 128, "rows=64 cols=32 head=0 warps=4 cache=none"},
  };
  for (const Call& c : calls) {
    KernelSpec spec;
    spec.kind = c.kind;
    spec.dim_qk = spec.dim_v = c.dim;
    spec.causal = true;
    spec.window = c.window_left >= 0;
    spec.vec = 8;
    spec.arch = arch;
    if (c.mask) {
      spec.mask_mod = mask::Expression::parse("doc[kv_idx] == doc[q_idx]", arrays).canonical();
      spec.mask_arrays = mask_arrays_text(arrays);
    }
    Problem p;
    p.seq_q = p.seq_kv = 8192;
    p.causal = true;
    p.window_left = c.window_left;
    const TuningParams run = cuda::tuning_for(spec, p, limit);
    EXPECT_EQ(run.to_string().rfind(c.expected, 0), 0u) << run.to_string();
    // (The plain row spills: the tables' choice, timed as it runs.)
    if (c.mask || spec.window)
      if (!compiles_without_spills(generate(spec, run), arch)) GTEST_SKIP() << "NVRTC not available";
  }
}

}  // namespace
}  // namespace flashgen
