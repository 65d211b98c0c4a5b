#include "codegen/generate.hpp"

#include <sstream>

#include "codegen/kernel_families.hpp"
#include "codegen/user_mask.hpp"

namespace flashgen {
namespace {

// Threads of the row kernels: 8 warps, one query row each (kRowKernelWarps
// in kernels/row_kernels.cuh).
constexpr int kRowKernelThreads = 256;

const char* element_constant(DType dtype) {
  switch (dtype) {
    case DType::f16: return "fg::kF16";
    case DType::bf16: return "fg::kBF16";
    case DType::f32: return "fg::kF32";
    case DType::e4m3: break;  // a KV cache's storage, never a kernel's element type
  }
  return "fg::kBF16";
}

// The entry's call of the kernel: over the grid's tile, or (varlen) over
// the tile's sequence, found from the grid as block_grid lays it out.
std::string entry_call(const KernelSpec& spec, const TuningParams& t, bool tensor_maps) {
  const std::string maps = tensor_maps ? ", maps" : "";
  if (!spec.varlen) return "Kernel::run(params" + maps + ", shared);";
  std::ostringstream s;
  s << "fg::run_sequence<Kernel, " << size_of(spec.dtype) << ", "
    << (spec.causal ? "true" : "false") << ", "
    << (spec.kind == KernelKind::backward_key_value ? "true" : "false") << ", " << t.block_rows
    << ", " << head_chunks_of(spec, t) << ">(params, shared" << maps << ");";
  return s.str();
}

}  // namespace

GeneratedKernel generate(const KernelSpec& spec, const TuningParams& t) {
  check_tuning(spec, t);
  const KindInfo kind = info_of(spec, t);
  GeneratedKernel g;
  g.name = spec.to_string() + " | " + t.to_string();
  g.entry = entry_of(spec.kind);
  // A producer warp comes as a whole warpgroup (setmaxnreg is per warpgroup).
  g.threads = is_row_kernel(spec.kind) ? kRowKernelThreads : (t.warps + (t.producer ? 4 : 0)) * 32;
  g.shared_bytes = shared_bytes(spec, t);

  std::ostringstream s;
  s << "// flashgen kernel: " << g.name << "\n"
    << "#include \"" << kind.header << "\"\n"
    << (spec.varlen ? "#include \"scheduler/sequences.cuh\"\n" : "") << "\n"
    << "namespace fg = flashgen_device;\n\n";
  const bool mask = !spec.mask_mod.empty();
  if (mask) s << user_mask_source(spec);
  s << "struct Config {\n"
    << "  static constexpr int kElement = " << element_constant(spec.dtype) << ";\n"
    << "  static constexpr int kDimQK = " << spec.dim_qk << ";\n"
    << "  static constexpr int kDimV = " << spec.dim_v << ";\n"
    << "  static constexpr bool kCausal = " << (spec.causal ? "true" : "false") << ";\n"
    << "  static constexpr bool kWindow = " << (spec.window ? "true" : "false") << ";\n"
    << "  static constexpr bool kSoftcap = " << (spec.softcap ? "true" : "false") << ";\n"
    << "  static constexpr bool kSinks = " << (spec.sinks ? "true" : "false") << ";\n"
    << "  static constexpr bool kAlibi = " << (spec.alibi ? "true" : "false") << ";\n"
    << "  static constexpr bool kMask = " << (mask ? "true" : "false") << ";\n"
    << "  static constexpr int kVec = " << spec.vec << ";\n";
  if (mask) s << "  typedef UserMask Mask;\n";
  if (!is_row_kernel(spec.kind)) {
    s << "  static constexpr bool kVarlen = " << (spec.varlen ? "true" : "false") << ";\n"
      << "  static constexpr int kWarps = " << t.warps << ";\n"
      << "  static constexpr int kRowTiles = " << t.row_tiles() << ";\n"
      << "  static constexpr int kBlockN = " << t.block_cols << ";\n"
      << "  static constexpr int kHeadChunks = " << head_chunks_of(spec, t) << ";\n"
      << "  static constexpr bool kCacheQ = " << ((t.cached & kCacheQ) ? "true" : "false") << ";\n"
      << "  static constexpr bool kCacheK = " << ((t.cached & kCacheK) ? "true" : "false") << ";\n"
      << "  static constexpr bool kCacheV = " << ((t.cached & kCacheV) ? "true" : "false") << ";\n"
      << "  static constexpr bool kCacheGradO = " << ((t.cached & kCacheGradO) ? "true" : "false")
      << ";\n";
    if (spec.kind == KernelKind::forward)
      s << "  static constexpr bool kSplitKeys = " << (spec.split_keys ? "true" : "false") << ";\n"
        << "  static constexpr bool kKeyCache = "
        << (spec.cache != KeyCache::none ? "true" : "false") << ";\n"
        << "  static constexpr bool kPagedCache = "
        << (spec.cache == KeyCache::paged ? "true" : "false") << ";\n"
        << "  static constexpr bool kFp8Cache = " << (spec.fp8_cache ? "true" : "false")
        << ";\n";
    if (t.wgmma && spec.kind == KernelKind::forward)
      s << "  static constexpr int kStages = " << wgmma_forward_stages(t) << ";\n"
        << "  static constexpr bool kPersistent = " << (t.persistent ? "true" : "false") << ";\n";
    else if (spec.kind == KernelKind::forward)
      s << "  static constexpr int kStages = " << t.stages << ";\n"
        << "  static constexpr bool kKeySplit = "
        << (t.split == WarpgroupSplit::keys ? "true" : "false") << ";\n";
    if (t.wgmma)
      s << "  static constexpr bool kTma = " << (t.tma ? "true" : "false") << ";\n"
        << "  static constexpr int kSwizzle = " << t.swizzle << ";\n"
        << "  static constexpr bool kPingPong = " << (t.pingpong ? "true" : "false") << ";\n";
    if (t.split == WarpgroupSplit::dims && spec.kind == KernelKind::backward_query)
      s << "  static constexpr int kKeyStages = " << backward_dims_split_stages(spec, t) << ";\n"
        << "  static constexpr int kValueStages = 2;\n";
    if (t.split == WarpgroupSplit::dims && spec.kind == KernelKind::backward_key_value)
      s << "  static constexpr int kStages = " << backward_dims_split_stages(spec, t) << ";\n";
  }
  s << "};\n\n"
    << "using Kernel = fg::" << kind.kernel << "<Config>;\n";
  if (!is_row_kernel(spec.kind))
    s << "static_assert(sizeof(Kernel::SharedStorage) == " << g.shared_bytes
      << ", \"host and device disagree on the shared-memory layout\");\n";
  // min 1 CTA per SM: ptxas may use up to 255 registers rather than spill to
  // fit an occupancy target of its own; the tuning decides occupancy.
  // TMA kernels also take their tensor maps, as parameters the copies read
  // in place (__grid_constant__); TMA writes shared memory 128-byte aligned.
  g.tensor_maps = t.tma;
  g.swizzle = t.swizzle;
  s << "\nextern \"C\" __global__ void __launch_bounds__(" << g.threads << ", 1) " << g.entry << "(const fg::AttentionParams params"
    << (g.tensor_maps ? ", const __grid_constant__ fg::TraversedTensorMaps maps" : "") << ") {\n"
    << "  extern __shared__ __align__(" << (t.swizzle != 0 ? 1024 : 128)
    << ") unsigned char shared[];\n"
    << "  " << entry_call(spec, t, g.tensor_maps) << "\n"
    << "}\n";
  g.source = s.str();
  return g;
}

}  // namespace flashgen
