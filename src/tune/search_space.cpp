#include "tune/search_space.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "tune/table_file.hpp"

namespace flashgen {
namespace {

const int kBlockRows[] = {32, 64, 128};
// Powers of two, and 48 and 96: the heuristic defaults use 48 where 64
// would spill (forward at D = 128), so their neighbours are candidates too.
const int kBlockCols[] = {16, 32, 48, 64, 96, 128};
const int kWarps[] = {2, 4, 8};
const int kHeadBlocks[] = {64, 128, 256};  // besides 0 (the whole dim)
// The wgmma forward: 1, 2 or 3 warpgroups; wgmma's n runs in steps of 16.
const int kWgmmaWarps[] = {4, 8, 12};
const int kWgmmaBlockCols[] = {32, 48, 64, 80, 96, 128, 176};
// 16-row tiles per warp: two let one K/V fragment feed two MMAs; more would
// not fit the accumulators of any but the smallest dims.
constexpr int kMaxRowTiles = 2;
// Q fragments held in registers cost Dqk / 4 registers per row tile: only
// worth trying while that leaves room for the accumulators.
constexpr int kMaxCachedQDim = 128;

int round_up(int a, int b) { return (a + b - 1) / b * b; }

std::string describe(const cuda::KernelResources& r) {
  return "spills " + std::to_string(r.spill_store_bytes) + "/" +
         std::to_string(r.spill_load_bytes) + " bytes (store/load), stack frame " +
         std::to_string(r.stack_frame_bytes) + " bytes, " + std::to_string(r.registers) +
         " registers";
}

bool spills(const cuda::KernelResources& r) {
  return r.spill_store_bytes > 0 || r.spill_load_bytes > 0 || r.stack_frame_bytes > 0;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// One compile job's outcome.
struct Compiled {
  bool done = false;
  bool failed = false;
  std::string error;
  cuda::KernelResources resources;
};

// Compiles jobs[first, last) on up to `threads` threads (a shared work queue).
void compile_range(const KernelSpec& spec, const std::vector<Candidate>& jobs, std::size_t first,
                   std::size_t last, int threads, const CompileFunction& compile,
                   std::vector<Compiled>& out) {
  std::atomic<std::size_t> next{first};
  auto worker = [&] {
    for (std::size_t i = next++; i < last; i = next++) {
      Compiled& c = out[i];
      try {
        c.resources = compile(spec, generate(spec, jobs[i].tuning));
      } catch (const std::exception& e) {
        c.failed = true;
        c.error = e.what();
      }
      c.done = true;
    }
  };
  const std::size_t count = last - first;
  const int n = static_cast<int>(std::min<std::size_t>(count, std::size_t(std::max(threads, 1))));
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

// `t` with a producer warpgroup whose four warps copy by cp.async, where TMA
// cannot read the rows (4- and 8-byte aligned); the forward's also four
// stages deep.
std::vector<TuningParams> copying_producer_variants(const KernelSpec& spec, const TuningParams& t) {
  if (spec.vec != 2 && spec.vec != 4) return {};
  std::vector<TuningParams> variants = {with_copying_producer(t)};
  if (spec.kind == KernelKind::forward) variants.push_back(with_copying_producer(t, 4));
  return variants;
}

// The key/value backward past Dqk + Dv = 256 on wgmma: two warpgroups over
// the same 64 keys, one holding dK, the other dV (split=outputs: each at
// most 256 columns, TMA copies; on token rows, the widened tiles).
std::vector<TuningParams> outputs_split_space(const KernelSpec& spec) {
  std::vector<TuningParams> space;
  if (spec.vec < 1 || spec.dim_qk > 256 || spec.dim_v > 256) return space;
  if (spec.vec < 8 && widest_token_row_tile(spec) > 256) return space;
  for (int cols : kWgmmaBlockCols) {
    TuningParams t{64, cols, 0, 8, 0};
    t.wgmma = true;
    t.split = WarpgroupSplit::outputs;
    space.push_back(with_tma_producer(t));
  }
  return space;
}

// The backward past 256 columns on wgmma: two warpgroups over the same 64
// rows, each with half of the head dims (split=dims, TMA copies; on token
// rows, the widened tiles up to 512 columns). The query
// kernel holds half of dQ per warpgroup, K two to four stages deep, Q and
// dO (the A operands of S and dP) in shared memory or registers; the
// key/value kernel a dV or a dK CTA per key block, Q and dO two or three
// stages deep, K (dV CTA) and V (dK CTA) in shared memory or registers.
std::vector<TuningParams> dims_split_space(const KernelSpec& spec) {
  std::vector<TuningParams> space;
  if (!tma_copies(spec) || !split_dims_tiles_fit(spec)) return space;
  const bool query = spec.kind == KernelKind::backward_query;
  const std::vector<int> stage_counts = query ? std::vector<int>{2, 3, 4} : std::vector<int>{2, 3};
  const std::vector<unsigned> caches =
      query ? std::vector<unsigned>{0u, kCacheQ, kCacheGradO, kCacheQ | kCacheGradO}
            : std::vector<unsigned>{0u, kCacheK, kCacheV, kCacheK | kCacheV};
  // Wide heads leave room for narrow traversed blocks only (16 at D = 512).
  for (int cols : {16, 32, 48, 64})
    for (int stages : stage_counts)
      for (unsigned cached : caches) {
        TuningParams t{64, cols, 0, 8, cached};
        t.wgmma = true;
        t.split = WarpgroupSplit::dims;
        space.push_back(with_tma_producer(t, stages));
      }
  return space;
}

// The wgmma kernels (sm_90a): whole warpgroups of 64 rows. The forward keeps
// at most 256 value columns per CTA (past that, chunks of 256); the backward
// kernels split no dims; all take any contiguous rows (generate.cpp states
// the same rules; candidates it refuses are listed as rejected; paths not yet
// run on a GPU are left out by the caller).
std::vector<TuningParams> wgmma_space(const KernelSpec& spec) {
  std::vector<TuningParams> space;
  if (spec.arch != "sm_90a" || spec.vec < 1) return space;
  const int dqk = round_up(spec.dim_qk, 16), dv = round_up(spec.dim_v, 16);
  int head = 0;
  switch (spec.kind) {
    case KernelKind::forward:
      head = dv > 256 ? 256 : 0;
      break;
    case KernelKind::backward_query:
      if (dqk > 256 || dv > 256) return dims_split_space(spec);
      break;
    case KernelKind::backward_key_value:
      if (dqk > 256 || dv > 256) return dims_split_space(spec);
      if (dqk + dv > 256) return outputs_split_space(spec);
      // Token rows whose widened dK and dV pass 256 columns together: the
      // split kernel too.
      if (spec.vec < 8 && token_row_tiles_together(spec) > 256)
        space = outputs_split_space(spec);
      break;
    default:
      return space;
  }
  for (int warps : kWgmmaWarps)
    for (int cols : kWgmmaBlockCols) {
      TuningParams t{16 * warps, cols, head, warps, 0};
      t.wgmma = true;
      space.push_back(t);
      if (warps < 8) continue;  // a producer needs two computing warpgroups (check_tuning)
      for (const TuningParams& copying : copying_producer_variants(spec, t))
        space.push_back(copying);
      if (!tma_copies(spec)) continue;
      space.push_back(with_tma_producer(t));
      // The forward two stages deep too: at D >= 200 the only TMA candidates
      // with wide key blocks that fit the shared memory (pruned later);
      // elsewhere the cost model ranks them beside the three-stage ones.
      if (spec.kind == KernelKind::forward) space.push_back(with_tma_producer(t, 2));
    }
  return space;
}

}  // namespace

std::vector<TuningParams> search_space(const KernelSpec& spec) {
  std::vector<TuningParams> space;
  const int split = round_up(split_dim(spec), 16);
  std::vector<int> heads = {0};
  for (int h : kHeadBlocks)
    if (h < split) heads.push_back(h);  // only a block that splits the dim
  std::vector<unsigned> caches = {0u};
  // The mma.sync forward may hold Q (the wgmma kernels' holds: wgmma_space).
  if (spec.kind == KernelKind::forward && spec.dim_qk <= kMaxCachedQDim) caches.push_back(kCacheQ);
  for (int rows : kBlockRows)
    for (int warps : kWarps) {
      if (rows % (16 * warps) != 0 || rows / (16 * warps) > kMaxRowTiles) continue;
      for (int cols : kBlockCols)
        for (int head : heads)
          for (unsigned cached : caches) space.push_back({rows, cols, head, warps, cached});
    }
  for (const TuningParams& t : wgmma_space(spec)) space.push_back(t);
  return space;
}

std::vector<TuningParams> pipeline_variants(const KernelSpec& spec, const TuningParams& t,
                                            std::size_t shared_limit) {
  std::vector<TuningParams> variants = {t};
  if (!t.wgmma || t.split != WarpgroupSplit::rows) return variants;
  // TMA into swizzled tiles (the default) and as 8-column slices; where TMA
  // cannot read the rows, the producer's four warps copying with cp.async.
  std::vector<TuningParams> others = {without_producer(t)};
  if (tma_copies(spec)) {
    others.push_back(with_tma_producer(t));
    others.push_back(with_tma_producer(t, 0, 0));
    if (spec.kind == KernelKind::forward)
      for (int stages : {2, 4}) {
        others.push_back(with_tma_producer(t, stages));
        others.push_back(with_tma_producer(t, stages, 0));
      }
  }
  for (const TuningParams& copying : copying_producer_variants(spec, t)) others.push_back(copying);
  for (const TuningParams& v : others) {
    if (std::find(variants.begin(), variants.end(), v) != variants.end()) continue;
    try {
      generate(spec, v);
    } catch (const Error&) {
      continue;
    }
    if (shared_bytes(spec, v) <= shared_limit) variants.push_back(v);
  }
  return variants;
}

CompileFunction compile_without_device() {
  return [](const KernelSpec& spec, const GeneratedKernel& g) {
    cuda::CompileRequest request{g.name, g.source, g.entry, spec.arch, {}};
    return cuda::compile_only(request).resources;
  };
}

CompileFunction compile_into_cache() {
  return [](const KernelSpec& spec, const GeneratedKernel& g) {
    cuda::KernelResources resources;
    cuda::precompile({g.name, g.source, g.entry, spec.arch, {}}, &resources);
    return resources;
  };
}

CompileFunction compile_and_load(int ordinal) {
  return [ordinal](const KernelSpec& spec, const GeneratedKernel& g) {
    // The same request the CUDA backend makes, so the timed call finds it loaded.
    cuda::CompileRequest request{g.name, g.source, g.entry, spec.arch, {}};
    return cuda::get_kernel(request, ordinal, g.shared_bytes).resources;
  };
}

static bool is_kept(const PruneSettings& s, const TuningParams& t) {
  for (const TuningParams& k : s.keep)
    if (k == t) return true;
  return false;
}

PruneResult prune(const KernelSpec& spec, const TuningParams& default_tuning,
                  const PruneSettings& s) {
  PruneResult result;
  const std::vector<TuningParams> space = search_space(spec);
  result.space = static_cast<int>(space.size());

  // 2. What generate() or the shared-memory limit refuses.
  std::vector<Candidate> ranked;
  for (const TuningParams& t : s.top > 0 ? space : std::vector<TuningParams>{}) {
    if (t == default_tuning || is_kept(s, t)) continue;  // queued below, whatever happens
    try {
      generate(spec, t);
    } catch (const Error& e) {
      result.rejected.push_back({t, e.what()});
      continue;
    }
    const std::size_t bytes = shared_bytes(spec, t);
    if (bytes > s.shared_limit) {
      result.rejected.push_back({t, "shared memory " + std::to_string(bytes) + " > " +
                                        std::to_string(s.shared_limit) + " bytes"});
      continue;
    }
    Candidate c;
    c.tuning = t;
    c.shared_bytes = bytes;
    c.estimated_cycles = estimated_cycles(spec, t, s.problem, s.device);
    ranked.push_back(c);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Candidate& a, const Candidate& b) {
    return a.estimated_cycles < b.estimated_cycles;
  });
  // The default goes first into the compile queue, then the tunings to keep:
  // they are kept even when they spill (the baselines either way).
  for (auto t = s.keep.rbegin(); t != s.keep.rend(); ++t) {
    if (*t == default_tuning) continue;
    Candidate k;
    k.tuning = *t;
    k.kept_anyway = true;
    k.shared_bytes = shared_bytes(spec, *t);
    k.estimated_cycles = estimated_cycles(spec, *t, s.problem, s.device);
    ranked.insert(ranked.begin(), k);
  }
  Candidate d;
  d.tuning = default_tuning;
  d.is_default = true;
  d.shared_bytes = shared_bytes(spec, default_tuning);
  d.estimated_cycles = estimated_cycles(spec, default_tuning, s.problem, s.device);
  ranked.insert(ranked.begin(), d);

  // 3. Compile in rank order, a batch of `threads` at a time, until `top` survive.
  const CompileFunction compile = s.compile ? s.compile : compile_without_device();
  const int threads = s.threads > 0
                          ? s.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<Compiled> compiled(ranked.size());
  std::size_t next = 0;
  int survivors = 0;
  std::size_t baselines = 0;  // the default and the tunings to keep, first in the queue
  while (baselines < ranked.size() && (ranked[baselines].is_default || ranked[baselines].kept_anyway))
    ++baselines;
  while (next < ranked.size() && (next == 0 || survivors < s.top)) {
    const std::size_t wanted =
        std::size_t(std::max(s.top - survivors, 0)) + (next == 0 ? baselines : 0);
    // Compile at least what is missing, and fill the threads.
    const std::size_t batch = std::max<std::size_t>(wanted, std::size_t(threads));
    const std::size_t last = std::min(ranked.size(), next + batch);
    compile_range(spec, ranked, next, last, threads, compile, compiled);
    result.compiled += static_cast<int>(last - next);
    for (std::size_t i = next; i < last; ++i) {
      const Compiled& c = compiled[i];
      Candidate& candidate = ranked[i];
      if (!c.failed) candidate.resources = c.resources;
      if (candidate.is_default || (candidate.kept_anyway && !c.failed)) {
        result.kept.push_back(candidate);  // the default's failure shows when it runs
      } else if (c.failed) {
        result.rejected.push_back({candidate.tuning, "compile error: " + first_line(c.error)});
      } else if (spills(c.resources)) {
        result.rejected.push_back({candidate.tuning, describe(c.resources)});
      } else if (survivors < s.top) {
        result.kept.push_back(candidate);
        ++survivors;
      }
    }
    next = last;
  }
  std::stable_sort(result.kept.begin(), result.kept.end(),
                   [](const Candidate& a, const Candidate& b) {
                     return a.estimated_cycles < b.estimated_cycles;
                   });
  return result;
}

}  // namespace flashgen
