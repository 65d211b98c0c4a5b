// `flashgen source`: prints the CUDA source generated for one kernel spec, the
// translation unit NVRTC compiles, so that a kernel can be read, compared
// between tunings or compiled by hand, without a GPU.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "codegen/heuristics.hpp"
#include "codegen/user_mask.hpp"
#include "commands.hpp"
#include "kernel_listing.hpp"
#include "problem_options.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen::cli {
namespace {


// "sm_" and a compute capability: what NVRTC's --gpu-architecture takes and
// what shared_limit_of_arch reads.
bool looks_like_arch(const std::string& arch) {
  return arch.size() > 3 && arch.rfind("sm_", 0) == 0 &&
         std::isdigit(static_cast<unsigned char>(arch[3]));
}

}  // namespace

int source_command(const std::vector<std::string>& words) {
  Arguments a("source",
              "--kind K --dqk D [--dv D] [--dtype bf16|f16|f32] [--causal] [--window]\n"
              "                      [--softcap] [--sinks] [--alibi] [--vec 8|4|2|1|0]"
              " [--split-keys [--kv-cache contiguous|paged [--fp8-cache]]]\n"
              "                      [--arch sm_90a] [--tuning \"rows=128 cols=64 ...\"]\n"
              "                      [--mask-mod EXPR [--mask-arrays doc:i,...]] [--headers]",
              "Prints the kernel source flashgen generates for one spec, as NVRTC compiles it,\n"
              "after a comment line with the spec, the tuning and the shared memory per CTA.\n"
              "The tuning is the library's default for the spec on ARCH (default_tuning; the\n"
              "tuning tables, which depend on the problem, are not consulted) unless --tuning\n"
              "gives one. No GPU needed. Exit code 2 for a bad option, 3 for a tuning that\n"
              "does not fit the spec.");
  a.option("kind", "K", "forward, backward_query, backward_key_value, backward_atomic,\n"
                        "                          backward_prepare, convert_grad_q, forward_combine or\n"
                        "                          backward_sinks or mask_blocks");
  a.option("dqk", "D", "head dimension of queries and keys");
  a.option("dv", "D", "head dimension of values (default: --dqk)");
  a.option("dtype", "T", "bf16 (default), f16, or f32 (the fp32 CUDA-core kernels)");
  a.flag("causal", "mask keys past a diagonal (causal, or a sliding window's right edge)");
  a.flag("window", "mask keys before a diagonal (a sliding window's left edge)");
  a.flag("softcap", "soft-capped logits");
  a.flag("sinks", "forward, forward_combine: a sink logit per query head");
  a.flag("alibi", "logits less ALiBi's bias");
  declare_mask_options(a);
  a.flag("split-keys", "forward: the split-key kernel of decode (partial results for\n"
                       "                          forward_combine)");
  a.option("kv-cache", "L", "with --split-keys: the kernel reading a KV cache in place,\n"
                            "                          contiguous or paged");
  a.flag("fp8-cache", "with --kv-cache: a cache of e4m3 (fp8) values");
  a.option("vec", "V", "alignment class: 8 (16-byte rows), 4, 2, 1, or 0 (dim stride not 1);\n"
                       "                          default: that of packed tensors of these dims");
  a.option("arch", "ARCH", "NVRTC target (default sm_90a); sets the shared-memory limit");
  a.option("tuning", "TEXT", "\"rows=R cols=C head=H warps=W cache=Q,K,V,dO|none [mma=wgmma]\";\n"
                             "                          fields left out: rows=64 cols=64 head=0 "
                             "warps=4 cache=none;\n"
                             "                          the row kernels (backward_prepare, "
                             "convert_grad_q,\n"
                             "                          forward_combine, backward_sinks) ignore it");
  a.flag("headers", "also print the device headers the source includes, each after\n"
                    "                          a \"// ---- file: NAME ----\" line");
  if (!a.parse(words)) return kExitOk;
  a.require("kind");
  a.require("dqk");

  KernelSpec spec;
  spec.kind = kernel_kind_named(a.choice("kind", "", kernel_kind_names()));
  spec.dim_qk = int(a.integer("dqk", 0, 1, kMaxCommandDim));
  spec.dim_v = int(a.integer("dv", spec.dim_qk, 1, kMaxCommandDim));
  spec.dtype = dtype_named(a.choice("dtype", "bf16", {"bf16", "f16", "f32"}));
  spec.causal = a.given("causal");
  spec.window = a.given("window");
  spec.softcap = a.given("softcap");
  spec.sinks = a.given("sinks");
  spec.alibi = a.given("alibi");
  spec.split_keys = a.given("split-keys");
  const std::string cache = a.choice("kv-cache", "none", {"none", "contiguous", "paged"});
  spec.cache = cache == "paged"        ? KeyCache::paged
               : cache == "contiguous" ? KeyCache::contiguous
                                       : KeyCache::none;
  spec.fp8_cache = a.given("fp8-cache");
  if ((spec.cache != KeyCache::none && !spec.split_keys) ||
      (spec.fp8_cache && spec.cache == KeyCache::none))
    throw UsageError("flashgen source: --kv-cache needs --split-keys, and --fp8-cache --kv-cache");
  if (const std::optional<mask::Expression> mask = mask_option(a)) {
    spec.mask_mod = mask->canonical();
    spec.mask_arrays = mask_arrays_text(mask->arrays());
  }
  spec.vec = std::stoi(a.choice("vec", std::to_string(packed_vec(spec.dim_qk, spec.dim_v)),
                                {"8", "4", "2", "1", "0"}));
  spec.arch = a.text("arch", "sm_90a");
  if (!looks_like_arch(spec.arch))
    throw UsageError("flashgen source: --arch must look like sm_90a or sm_80, got '" + spec.arch +
                     "'");

  TuningParams tuning = default_tuning(spec, shared_limit_of_arch(spec.arch));
  if (a.given("tuning")) {
    const std::string text = a.text("tuning", "");
    try {
      tuning = parse_tuning(text);
    } catch (const Error& e) {
      throw UsageError("flashgen source: --tuning '" + text +
                       "' is not \"rows=R cols=C head=H warps=W cache=Q,K,V,dO|none [mma=wgmma]\" (" +
                       e.what() + ")");
    }
  }
  std::string listing;
  try {
    listing = kernel_listing(spec, tuning, a.given("headers"));
  } catch (const Error& e) {
    // generate()'s message names the tuning, the spec and the rule; say which
    // option to change when the tuning came from the command line.
    if (!a.given("tuning")) throw;
    throw Error(e.code(), std::string("--tuning: ") + e.what());
  }
  std::fputs(listing.c_str(), stdout);
  return kExitOk;
}

}  // namespace flashgen::cli
