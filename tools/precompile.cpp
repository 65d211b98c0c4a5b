// `flashgen precompile`: compiles the kernels of a set of head dimensions (with
// the masks and score modifiers a deployment calls, and its decode steps)
// into the on-disk cache without a GPU, so that first calls on the GPU load
// cubins instead of compiling (deployment images, CI warm-up, short GPU
// sessions).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "arguments.hpp"
#include "codegen/generate.hpp"
#include "commands.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/kernel_choice.hpp"
#include "cuda/query_head_packing.hpp"
#include "cuda/runtime/runtime.hpp"
#include "kernel_listing.hpp"
#include "sweep.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen::cli {
namespace {

// The sequence lengths whose kernels are compiled unless --seqs names
// others: a short one (the tuning tables' rows of short sequences, the
// forward that walks its tiles) and a long one (the rows of long sequences).
const std::vector<std::int64_t> kDefaultSequences = {256, 8192};

// The problem a dimension's kernels are generated for: packed tensors, one
// head, `seq` queries and keys, with the command's masks and score
// modifiers. The modifiers' vectors are never read (the specs only note
// that they are given).
Problem problem_of(std::int64_t d, std::int64_t dv, DType dtype, bool causal, std::int64_t seq,
                   const Arguments& a, const std::shared_ptr<const mask::BoundMask>& mask) {
  static float unread[1];
  Problem p;
  p.batch = 1;
  p.seq_q = p.seq_kv = seq;
  p.heads_q = p.heads_kv = 1;
  p.dim_qk = d;
  p.dim_v = dv;
  p.dtype = dtype;
  p.causal = causal;
  const std::vector<std::int64_t> window = a.integer_list("window", {-1, -1}, -1, 1 << 30);
  if (window.size() != 2) throw UsageError("--window takes two integers, LEFT,RIGHT");
  p.window_left = window[0], p.window_right = window[1];
  p.softcap = a.number("softcap", 0.0, 0.0);
  if (a.given("sinks")) p.sinks = HeadVectorView::heads(unread, 1);
  if (a.given("alibi")) p.alibi_slopes = HeadVectorView::heads(unread, 1);
  p.mask = mask;
  // Packed sequences: the offsets are stand-ins that nothing reads.
  static const std::int32_t kStandIn = 0;
  if (a.given("varlen")) p.sequences.q_begin = p.sequences.k_begin = &kStandIn;
  return p;
}

// The kernels a call of `p` launches for each --kinds item (with a user
// mask, its mask_blocks kernel first).
std::vector<KernelKind> kinds_of(const std::vector<std::string>& names, const Problem& p) {
  std::vector<KernelKind> kinds;
  if (p.has_mask()) kinds.push_back(KernelKind::mask_blocks);
  for (const std::string& name : names) {
    if (name == "forward") {
      kinds.push_back(KernelKind::forward);
    } else {
      const std::vector<KernelKind> backward = cuda::backward_kinds(p, name == "backward_atomic");
      kinds.insert(kinds.end(), backward.begin(), backward.end());
    }
  }
  return kinds;
}

// The problem as a KV-cache call of that layout makes it: the kernels'
// specs read only whether there is a cache, whether it is paged and whether
// it is fp8, so the indices are stand-ins that nothing reads.
Problem with_cache(Problem p, KeyCache cache, bool fp8) {
  static const std::int32_t kStandIn = 0;
  if (cache == KeyCache::none) return p;
  p.kv_cache.lengths = &kStandIn;
  if (cache == KeyCache::paged) p.kv_cache.block_table = &kStandIn;
  p.kv_cache.fp8 = fp8;
  return p;
}

// Decode with `group` query heads per key/value head: the split-key forward,
// its combine and the whole forward of the problem as the kernels see it
// (query heads packed as rows where they pack); with a KV cache (`caches`),
// the split-key forward that reads it (of e4m3 bytes where `fp8`). Each
// spec comes with the decode step's problem, whose single query row picks
// the split-key forward's decode shape.
std::vector<std::pair<KernelSpec, Problem>> decode_specs(const Problem& base, std::int64_t group,
                                                         int vec, const std::string& arch,
                                                         const std::vector<KeyCache>& caches,
                                                         bool fp8) {
  Problem p = base;
  p.sequences = {};  // a decode step is a plain or KV-cache call
  p.seq_q = 1;
  p.heads_q = group;
  // The problem as the kernels see it: query heads packed as rows where they pack.
  const auto as_seen = [](const Problem& x) {
    return cuda::packs_query_heads(x) ? cuda::packed_problem(x) : x;
  };
  const Problem seen = as_seen(p);
  std::vector<std::pair<KernelSpec, Problem>> specs = {
      {cuda::spec_of(KernelKind::forward, seen, vec, arch, true), seen},
      {cuda::spec_of(KernelKind::forward_combine, seen, vec, arch), seen},
      {cuda::spec_of(KernelKind::forward, seen, vec, arch), seen}};
  if (seen.has_mask())
    specs.push_back({cuda::spec_of(KernelKind::mask_blocks, seen, vec, arch), seen});
  for (KeyCache cache : caches) {
    const Problem cached = as_seen(with_cache(p, cache, fp8));
    specs.push_back({cuda::spec_of(KernelKind::forward, cached, vec, arch, true), cached});
    specs.push_back({cuda::spec_of(KernelKind::forward_combine, cached, vec, arch), cached});
  }
  return specs;
}

}  // namespace

int precompile_command(const std::vector<std::string>& words) {
  Arguments a("precompile",
              "[--dims 64,128 | --sweep] [--dv D] [--dtype bf16|f16] [--causal 0|1|both]\n"
              "                      [--arch sm_90a]\n"
              "                      [--kinds forward,backward,backward_atomic] [--decode G,...]\n"
              "                      [--kv-cache contiguous|paged|both] [--fp8-cache]\n"
              "                      [--seqs N,...] [--window L,R] [--softcap C] [--sinks] [--alibi]\n"
              "                      [--varlen] [--mask-mod EXPR --mask-arrays doc:i,...] [--threads N]",
              "Compiles the kernels that problems of these head dimensions (packed tensors, "
              "Dqk = D, Dv = D or --dv, the lengths of --seqs) use on ARCH into the cache "
              "directory ($FLASHGEN_CACHE_DIR or "
              "~/.cache/flashgen/<version>/<arch>), with NVRTC and no GPU. The masks and score "
              "modifiers select the kernels of calls that pass them (a user mask is compiled "
              "for its expression); --decode adds the kernels of decode steps (one query, "
              "G query heads per key/value head), and with --kv-cache those of decode steps "
              "over a KV cache (forward_with_kvcache); --varlen compiles the kernels of packed "
              "sequences instead of the plain ones (--seqs the longest sequence).");
  declare_dims_options(a);
  a.option("dv", "D",
           "value head dimension of every problem (default: Dv = Dqk, each of the dims)");
  a.option("dtype", "T", "bf16 (default) or f16");
  a.option("causal", "C", "0 (default), 1 or both");
  a.option("arch", "ARCH", "NVRTC target (default sm_90a)");
  a.option("kinds", "K,K", "forward, backward, backward_atomic (default: all three)");
  a.option("decode", "G,...", "also decode steps with G query heads per key/value head");
  a.option("kv-cache", "L", "with --decode, also over a KV cache: contiguous, paged or both");
  a.flag("fp8-cache", "with --kv-cache, the caches store e4m3 (fp8) values");
  a.option("seqs", "N,...",
           "sequence lengths (queries and keys) whose kernels are compiled: the tuning tables "
           "pick rows by length (default 256,8192)");
  a.option("window", "L,R", "sliding window (flash-attn's window_size; -1 unbounded)");
  a.option("softcap", "C", "soft-capped logits (default 0: none)");
  a.flag("sinks", "a sink logit per query head");
  a.flag("alibi", "ALiBi slopes");
  a.flag("varlen", "the kernels of packed sequences (forward_varlen, backward_varlen)");
  declare_mask_options(a);
  a.option("threads", "N", "compiler threads (default: hardware threads)");
  if (!a.parse(words)) return kExitOk;
  const std::vector<std::int64_t> dims = dims_from(a, {64, 128}, 512);
  const std::int64_t dim_v = a.given("dv") ? a.integer("dv", 0, 1, 512) : 0;  // 0: each D
  const DType dtype = a.choice("dtype", "bf16", {"bf16", "f16"}) == "f16" ? DType::f16 : DType::bf16;
  const std::string causal = a.choice("causal", "0", {"0", "1", "both"});
  const std::string arch = a.text("arch", "sm_90a");
  const std::vector<std::string> kind_names =
      a.choice_list("kinds", {"forward", "backward", "backward_atomic"},
                    {"forward", "backward", "backward_atomic"});
  const std::vector<std::int64_t> groups = a.integer_list("decode", {}, 1, 1024);
  const std::vector<std::int64_t> sequences =
      a.integer_list("seqs", kDefaultSequences, 1, std::int64_t(1) << 30);
  const std::string layout =
      a.choice("kv-cache", "none", {"none", "contiguous", "paged", "both"});
  std::vector<KeyCache> caches;
  if (layout == "contiguous" || layout == "both") caches.push_back(KeyCache::contiguous);
  if (layout == "paged" || layout == "both") caches.push_back(KeyCache::paged);
  const int threads = static_cast<int>(
      a.integer("threads", std::max(1u, std::thread::hardware_concurrency()), 1, 256));
  std::shared_ptr<const mask::BoundMask> mask;
  if (std::optional<mask::Expression> e = mask_option(a))
    mask = std::make_shared<const mask::BoundMask>(mask::BoundMask{std::move(*e), {}});
  const std::size_t shared_limit = shared_limit_of_arch(arch);

  std::vector<GeneratedKernel> work;
  std::set<std::string> names;  // a kernel several problems share is compiled once
  const auto add = [&](const KernelSpec& spec, const Problem& p) {
    GeneratedKernel g = generate(spec, cuda::tuning_of(spec, p, shared_limit));
    if (names.insert(g.name).second) work.push_back(std::move(g));
  };
  for (std::int64_t d : dims)
    for (bool is_causal : {false, true}) {
      if ((causal == "0" && is_causal) || (causal == "1" && !is_causal)) continue;
      for (std::int64_t seq : sequences) {
        const std::int64_t dv = dim_v > 0 ? dim_v : d;
        const Problem p = problem_of(d, dv, dtype, is_causal, seq, a, mask);
        const int vec = packed_vec(d, dv);
        for (KernelKind kind : kinds_of(kind_names, p)) add(cuda::spec_of(kind, p, vec, arch), p);
        for (std::int64_t group : groups)
          for (const auto& [spec, step] :
               decode_specs(p, group, vec, arch, caches, a.given("fp8-cache")))
            add(spec, step);
      }
    }

  std::atomic<std::size_t> next{0}, done{0};
  std::atomic<int> failures{0};
  std::mutex print;
  auto worker = [&] {
    for (std::size_t i = next++; i < work.size(); i = next++) {
      const GeneratedKernel& g = work[i];
      std::string status;
      try {
        status = cuda::precompile({g.name, g.source, g.entry, arch, {}}) ? "cached" : "compiled";
      } catch (const Error& e) {
        status = std::string("FAILED: ") + e.what();
        ++failures;
      }
      std::lock_guard<std::mutex> lock(print);
      std::fprintf(stderr, "[%zu/%zu] %s: %s\n", ++done, work.size(), g.name.c_str(),
                   status.c_str());
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  std::printf("%zu kernels in %s (%d failed)\n", work.size(), cuda::cache_dir(arch).c_str(),
              failures.load());
  return failures > 0 ? kExitCheckFailed : kExitOk;
}

}  // namespace flashgen::cli
