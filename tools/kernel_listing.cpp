#include "kernel_listing.hpp"

#include <map>
#include <set>
#include <sstream>

#include "codegen/generate.hpp"
#include "codegen/user_mask.hpp"
#include "cuda/runtime/embedded_headers.hpp"
#include "tune/tuning_table.hpp"

namespace flashgen::cli {
namespace {

constexpr KernelKind kKinds[] = {
    KernelKind::forward,         KernelKind::backward_query,   KernelKind::backward_key_value,
    KernelKind::backward_atomic, KernelKind::backward_prepare, KernelKind::convert_grad_q,
    KernelKind::forward_combine, KernelKind::backward_sinks,   KernelKind::mask_blocks,
};

// The NAME of each line `#include "NAME"` of a text. The device headers
// include each other only this way (no macros, no angle brackets).
std::vector<std::string> quoted_includes(const std::string& text) {
  static const std::string kDirective = "#include \"";
  std::vector<std::string> names;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, kDirective.size(), kDirective) != 0)
      continue;
    const std::size_t open = start + kDirective.size(), close = line.find('"', open);
    if (close != std::string::npos) names.push_back(line.substr(open, close - open));
  }
  return names;
}

std::map<std::string, const char*> header_texts() {
  std::map<std::string, const char*> texts;
  for (const cuda::EmbeddedHeader& h : cuda::embedded_device_headers()) texts[h.name] = h.text;
  return texts;
}

// Depth first, a header after its includes: the order in which #pragma once
// headers lay their text into the translation unit.
void visit(const std::string& name, const std::map<std::string, const char*>& texts,
           std::set<std::string>& seen, std::vector<std::string>& order) {
  const auto found = texts.find(name);
  if (found == texts.end() || !seen.insert(name).second) return;
  for (const std::string& child : quoted_includes(found->second)) visit(child, texts, seen, order);
  order.push_back(name);
}

}  // namespace

std::vector<std::string> kernel_kind_names() {
  std::vector<std::string> names;
  for (KernelKind kind : kKinds) names.push_back(to_string(kind));
  return names;
}

KernelKind kernel_kind_named(const std::string& name) {
  for (KernelKind kind : kKinds)
    if (name == to_string(kind)) return kind;
  throw Error(ErrorCode::invalid_argument, "unknown kernel kind '" + name + "'");
}

void declare_mask_options(Arguments& a) {
  a.option("mask-mod", "EXPR", "a user mask (Options::mask_mod) spliced into the kernels");
  a.option("mask-arrays", "LIST",
           "the arrays --mask-mod reads, name:i (int32) or name:f (fp32), comma-separated");
}

std::optional<mask::Expression> mask_option(const Arguments& a) {
  const std::string command = "flashgen " + a.command() + ": ";
  if (!a.given("mask-mod")) {
    if (a.given("mask-arrays")) throw UsageError(command + "--mask-arrays goes with --mask-mod");
    return std::nullopt;
  }
  try {
    return mask::Expression::parse(a.text("mask-mod", ""),
                                   parse_mask_arrays(a.text("mask-arrays", "")));
  } catch (const Error& e) {
    throw UsageError(command + "--mask-mod / --mask-arrays: " + e.what());
  }
}

int packed_vec(std::int64_t dim_qk, std::int64_t dim_v) {
  for (int vec : {8, 4, 2})
    if (dim_qk % vec == 0 && dim_v % vec == 0) return vec;
  return 1;
}

std::vector<std::string> included_headers(const std::string& source) {
  const std::map<std::string, const char*> texts = header_texts();
  std::set<std::string> seen;
  std::vector<std::string> order;
  for (const std::string& name : quoted_includes(source)) visit(name, texts, seen, order);
  return order;
}

std::string kernel_listing(const KernelSpec& spec, const TuningParams& tuning, bool headers) {
  const GeneratedKernel g = generate(spec, tuning);
  const std::size_t limit = shared_limit_of_arch(spec.arch);
  std::ostringstream out;
  out << "// " << spec.to_string() << " | " << tuning.to_string() << " | shared memory "
      << g.shared_bytes << " bytes per CTA (" << spec.arch << " allows " << limit << ")"
      << (g.shared_bytes > limit ? ", too much: it would not launch" : "") << "\n"
      << g.source;
  if (headers) {
    const std::map<std::string, const char*> texts = header_texts();
    for (const std::string& name : included_headers(g.source)) {
      const std::string text = texts.at(name);
      out << "\n// ---- file: " << name << " ----\n"
          << text << (text.empty() || text.back() == '\n' ? "" : "\n");
    }
  }
  return out.str();
}

}  // namespace flashgen::cli
