#include "codegen/kernel_spec.hpp"

#include <cstdint>
#include <cstdio>
#include <sstream>

namespace flashgen {

const char* to_string(KernelKind kind) {
  switch (kind) {
    case KernelKind::forward: return "forward";
    case KernelKind::backward_query: return "backward_query";
    case KernelKind::backward_key_value: return "backward_key_value";
    case KernelKind::backward_atomic: return "backward_atomic";
    case KernelKind::backward_prepare: return "backward_prepare";
    case KernelKind::convert_grad_q: return "convert_grad_q";
    case KernelKind::forward_combine: return "forward_combine";
    case KernelKind::backward_sinks: return "backward_sinks";
    case KernelKind::mask_blocks: return "mask_blocks";
  }
  return "?";
}

const char* to_string(KeyCache cache) {
  switch (cache) {
    case KeyCache::none: return "none";
    case KeyCache::contiguous: return "contiguous";
    case KeyCache::paged: return "paged";
  }
  return "none";
}

std::string KernelSpec::to_string() const {
  std::ostringstream s;
  s << flashgen::to_string(kind) << ' ' << flashgen::to_string(dtype) << " dqk=" << dim_qk
    << " dv=" << dim_v << " causal=" << (causal ? 1 : 0) << " vec=" << vec << ' ' << arch;
  if (window) s << " window";
  if (softcap) s << " softcap";
  if (sinks) s << " sinks";
  if (alibi) s << " alibi";
  if (split_keys) s << " split_keys";
  if (cache != KeyCache::none) s << " kv_cache=" << flashgen::to_string(cache);
  if (fp8_cache) s << " e4m3";
  if (varlen) s << " varlen";
  if (!mask_mod.empty()) {
    // FNV-1a: a short name for logs and file names; caches key on the source.
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (char c : mask_arrays + "|" + mask_mod)
      h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    s << " mask=" << hex;
  }
  return s.str();
}

namespace {

std::string cached_names(unsigned cached) {
  static const struct { unsigned bit; const char* name; } names[] = {
      {kCacheQ, "Q"}, {kCacheK, "K"}, {kCacheV, "V"}, {kCacheGradO, "dO"}};
  std::string out;
  for (const auto& n : names)
    if (cached & n.bit) out.append(out.empty() ? "" : ",").append(n.name);
  return out.empty() ? "none" : out;
}

unsigned parse_cached(const std::string& text) {
  if (text == "none") return 0;
  unsigned bits = 0;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name == "Q") bits |= kCacheQ;
    else if (name == "K") bits |= kCacheK;
    else if (name == "V") bits |= kCacheV;
    else if (name == "dO") bits |= kCacheGradO;
    else throw Error(ErrorCode::invalid_argument, "tuning: unknown cached operand '" + name + "'");
  }
  return bits;
}

}  // namespace

const char* to_string(WarpgroupSplit split) {
  switch (split) {
    case WarpgroupSplit::rows: return "rows";
    case WarpgroupSplit::dims: return "dims";
    case WarpgroupSplit::outputs: return "outputs";
    case WarpgroupSplit::keys: return "keys";
  }
  return "rows";
}

std::string TuningParams::to_string() const {
  std::ostringstream s;
  s << "rows=" << block_rows << " cols=" << block_cols << " head=" << head_block
    << " warps=" << warps << " cache=" << cached_names(cached);
  if (wgmma) s << " mma=wgmma";  // omitted for mma.sync, the default
  if (stages != 0) s << " stages=" << stages;  // omitted for the kernel's default
  if (producer) s << " producer=warp";
  if (tma) s << " copy=tma";  // omitted for cp.async, the default
  if (split != WarpgroupSplit::rows) s << " split=" << flashgen::to_string(split);  // rows: omitted
  if (swizzle != 0) s << " swizzle=" << swizzle;  // omitted for the core-matrix layout
  if (persistent) s << " schedule=persistent";    // omitted for a CTA per tile
  if (pingpong) s << " pingpong=1";               // omitted for warpgroups issuing freely
  return s.str();
}

TuningParams parse_tuning(const std::string& text) {
  TuningParams t;
  std::istringstream in(text);
  std::string field;
  while (in >> field) {
    const auto eq = field.find('=');
    if (eq == std::string::npos)
      throw Error(ErrorCode::invalid_argument, "tuning: expected key=value, got '" + field + "'");
    const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    try {
      if (key == "rows") t.block_rows = std::stoi(value);
      else if (key == "cols") t.block_cols = std::stoi(value);
      else if (key == "head") t.head_block = std::stoi(value);
      else if (key == "warps") t.warps = std::stoi(value);
      else if (key == "cache") t.cached = parse_cached(value);
      else if (key == "stages") t.stages = std::stoi(value);
      else if (key == "swizzle") t.swizzle = std::stoi(value);
      else if (key == "producer" && (value == "warp" || value == "none")) t.producer = value == "warp";
      else if (key == "producer") throw Error(ErrorCode::invalid_argument, "tuning: producer must be warp or none, got '" + value + "'");
      else if (key == "copy" && (value == "tma" || value == "async")) t.tma = value == "tma";
      else if (key == "split" && value == "rows") t.split = WarpgroupSplit::rows;
      else if (key == "split" && value == "dims") t.split = WarpgroupSplit::dims;
      else if (key == "split" && value == "outputs") t.split = WarpgroupSplit::outputs;
      else if (key == "split" && value == "keys") t.split = WarpgroupSplit::keys;
      else if (key == "split") throw Error(ErrorCode::invalid_argument, "tuning: split must be rows, dims, outputs or keys, got '" + value + "'");
      else if (key == "copy") throw Error(ErrorCode::invalid_argument, "tuning: copy must be async or tma, got '" + value + "'");
      else if (key == "schedule" && (value == "persistent" || value == "grid")) t.persistent = value == "persistent";
      else if (key == "schedule") throw Error(ErrorCode::invalid_argument, "tuning: schedule must be grid or persistent, got '" + value + "'");
      else if (key == "pingpong" && (value == "1" || value == "0")) t.pingpong = value == "1";
      else if (key == "pingpong") throw Error(ErrorCode::invalid_argument, "tuning: pingpong must be 0 or 1, got '" + value + "'");
      else if (key == "mma" && (value == "wgmma" || value == "sync")) t.wgmma = value == "wgmma";
      else if (key == "mma") throw Error(ErrorCode::invalid_argument, "tuning: mma must be sync or wgmma, got '" + value + "'");
      else throw Error(ErrorCode::invalid_argument, "tuning: unknown key '" + key + "'");
    } catch (const std::logic_error&) {
      throw Error(ErrorCode::invalid_argument, "tuning: bad value in '" + field + "'");
    }
  }
  return t;
}

}  // namespace flashgen
