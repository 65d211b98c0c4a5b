// The rules of Options on their own, before any tensor is looked at. The
// per-head vectors' shapes, memory and overlap are checked with the tensors
// (validate.cpp).
#include <cctype>
#include <cmath>
#include <set>
#include <string>

#include "api/operands.hpp"
#include "api/validate.hpp"

namespace flashgen::api {
namespace {

bool is_valid(CausalAlignment alignment) {
  const int value = static_cast<int>(alignment);
  return value == static_cast<int>(CausalAlignment::bottom_right) ||
         value == static_cast<int>(CausalAlignment::top_left);
}

void check_window_side(const char* name, std::int64_t value) {
  if (value < -1)
    fail("options.%s (%lld) must be >= -1 (-1 = unbounded, 0 = no key on that side of the "
         "diagonal)",
         name, static_cast<long long>(value));
}

void check_rank(const char* name, const HeadVectorView& view, int max_rank, const char* shapes) {
  if (view.given() && (view.rank < 1 || view.rank > max_rank))
    fail("options.%s.rank (%d) must be %s", name, view.rank, shapes);
}

bool is_identifier(const std::string& name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// Names a kernel could not declare (C and CUDA C++ keywords a mask might pick).
bool is_keyword(const std::string& name) {
  static const std::set<std::string> kKeywords = {
      "auto", "bool", "break", "case", "char", "const", "continue", "default", "do", "double",
      "else", "enum", "extern", "false", "float", "for", "goto", "if", "inline", "int", "long",
      "new", "nullptr", "register", "return", "short", "signed", "sizeof", "static", "struct",
      "switch", "this", "true", "typedef", "union", "unsigned", "void", "volatile", "while",
      "class", "delete", "operator", "template", "typename", "namespace", "using", "half"};
  return kKeywords.count(name) != 0;
}

// The arrays' own rules; their memory is checked with the tensors
// (validate.cpp), the expression's names by the parser.
void check_mask_tensors(const Options& options) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < options.mask_tensors.size(); ++i) {
    const MaskTensorView& t = options.mask_tensors[i];
    const char* name = t.name.c_str();
    if (!is_identifier(t.name))
      fail("options.mask_tensors[%zu].name (\"%s\") must be an identifier ([A-Za-z_][A-Za-z0-9_]*)",
           i, name);
    if (t.name == "b" || t.name == "h" || t.name == "q_idx" || t.name == "kv_idx" ||
        is_keyword(t.name))
      fail("options.mask_tensors[\"%s\"]: the name is taken (b, h, q_idx, kv_idx and C keywords "
           "cannot name a mask tensor)",
           name);
    if (!seen.insert(t.name).second)
      fail("options.mask_tensors[\"%s\"]: the name is given twice; each must be unique", name);
    const int element = static_cast<int>(t.element);
    if (element != static_cast<int>(MaskElement::int32) &&
        element != static_cast<int>(MaskElement::float32))
      fail("options.mask_tensors[\"%s\"].dtype (%d) must be int32 (0) or float32 (1)", name,
           element);
    if (t.rank != 1)
      fail("options.mask_tensors[\"%s\"].rank (%d) must be 1: mask tensors are 1-D arrays", name,
           t.rank);
  }
  if (options.mask_mod.empty()) {
    if (!options.mask_tensors.empty())
      fail("options.mask_tensors are given without options.mask_mod: they are the arrays the mask "
           "expression reads");
    return;
  }
  bind_mask(options);  // parses: throws naming the problem and its column
}

}  // namespace

void check_options(const Options& options) {
  if (!is_valid(options.backend))
    fail("options.backend (%d) is not a valid Backend (automatic = 0, cuda = 1, cpu = 2)",
         static_cast<int>(options.backend));
  if (options.scale.has_value() && (!std::isfinite(*options.scale) || *options.scale == 0.0))
    fail("options.scale (%g) must be finite and non-zero", *options.scale);
  if (options.cpu_threads < 0)
    fail("options.cpu_threads (%d) must be >= 0 (0 = all hardware threads)", options.cpu_threads);
  if (!is_valid(options.causal_alignment))
    fail("options.causal_alignment (%d) is not a valid CausalAlignment (bottom_right = 0: query "
         "i sees keys j <= i + seq_kv - seq_q; top_left = 1: keys j <= i)",
         static_cast<int>(options.causal_alignment));
  check_window_side("window_left", options.window_left);
  check_window_side("window_right", options.window_right);
  if (!std::isfinite(options.softcap) || options.softcap < 0.0)
    fail("options.softcap (%g) must be finite and >= 0 (0 = off; a negative cap is refused)",
         options.softcap);
  check_rank("alibi_slopes", options.alibi_slopes, 2, "1 ([heads_q]) or 2 ([batch, heads_q])");
  check_rank("sinks", options.sinks, 1, "1 ([heads_q])");
  check_rank("grad_sinks", options.grad_sinks, 1, "1 ([heads_q])");
  check_mask_tensors(options);
}

}  // namespace flashgen::api
