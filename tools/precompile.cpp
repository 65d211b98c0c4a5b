// `flashgen precompile`: compiles the kernels of a set of head dimensions into
// the on-disk cache without a GPU, so that first calls on the GPU load cubins
// instead of compiling (deployment images, CI warm-up, short GPU sessions).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "arguments.hpp"
#include "codegen/generate.hpp"
#include "commands.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/runtime/runtime.hpp"
#include "kernel_listing.hpp"
#include "sweep.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen::cli {
namespace {

// The kernels each --kinds item launches.
std::vector<KernelKind> kinds_of(const std::vector<std::string>& names) {
  std::vector<KernelKind> kinds;
  for (const std::string& name : names) {
    if (name == "forward") {
      kinds.push_back(KernelKind::forward);
    } else if (name == "backward") {
      kinds.insert(kinds.end(), {KernelKind::backward_query, KernelKind::backward_key_value});
    } else {
      kinds.insert(kinds.end(), {KernelKind::backward_prepare, KernelKind::backward_atomic,
                                 KernelKind::convert_grad_q});
    }
  }
  return kinds;
}

}  // namespace

int precompile_command(const std::vector<std::string>& words) {
  Arguments a("precompile",
              "[--dims 64,128 | --sweep] [--dtype bf16|f16] [--causal 0|1|both] [--arch sm_90a]\n"
              "                      [--kinds forward,backward,backward_atomic] [--threads N]",
              "Compiles the kernels that problems of these head dimensions (packed tensors, "
              "Dqk = Dv = D) use on ARCH into the cache directory ($FLASHGEN_CACHE_DIR or "
              "~/.cache/flashgen/<version>/<arch>), with NVRTC and no GPU.");
  declare_dims_options(a);
  a.option("dtype", "T", "bf16 (default) or f16");
  a.option("causal", "C", "0 (default), 1 or both");
  a.option("arch", "ARCH", "NVRTC target (default sm_90a)");
  a.option("kinds", "K,K", "forward, backward, backward_atomic (default: all three)");
  a.option("threads", "N", "compiler threads (default: hardware threads)");
  if (!a.parse(words)) return kExitOk;
  const std::vector<std::int64_t> dims = dims_from(a, {64, 128}, 512);
  const DType dtype = a.choice("dtype", "bf16", {"bf16", "f16"}) == "f16" ? DType::f16 : DType::bf16;
  const std::string causal = a.choice("causal", "0", {"0", "1", "both"});
  const std::string arch = a.text("arch", "sm_90a");
  const std::vector<KernelKind> kinds = kinds_of(
      a.choice_list("kinds", {"forward", "backward", "backward_atomic"},
                    {"forward", "backward", "backward_atomic"}));
  const int threads = static_cast<int>(
      a.integer("threads", std::max(1u, std::thread::hardware_concurrency()), 1, 256));

  std::vector<GeneratedKernel> work;
  for (std::int64_t d : dims)
    for (bool is_causal : {false, true}) {
      if ((causal == "0" && is_causal) || (causal == "1" && !is_causal)) continue;
      Problem p;
      p.batch = 1;
      p.seq_q = p.seq_kv = 8192;
      p.heads_q = p.heads_kv = 1;
      p.dim_qk = p.dim_v = d;
      p.dtype = dtype;
      p.causal = is_causal;
      for (KernelKind kind : kinds) {
        KernelSpec spec{kind, dtype, int(d), int(d), is_causal, packed_vec(d, d), arch};
        work.push_back(generate(spec, cuda::tuning_for(spec, p, shared_limit_of_arch(arch))));
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
