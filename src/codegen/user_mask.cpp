#include "codegen/user_mask.hpp"

#include <map>
#include <sstream>

#include "flashgen/flashgen.hpp"

namespace flashgen {
namespace {

using mask::Expression;
using mask::Node;
using mask::Op;
using mask::Type;

const char* wrapping_call(Op op) {
  switch (op) {
    case Op::add: return "fg::mask_add";
    case Op::subtract: return "fg::mask_subtract";
    case Op::multiply: return "fg::mask_multiply";
    case Op::divide: return "fg::mask_divide";
    case Op::modulo: return "fg::mask_modulo";
    default: return nullptr;
  }
}

// The C type a node's value keeps between the sides and the verdict.
const char* value_type(const Node& node) {
  if (node.type == Type::floating) return "float";
  switch (node.op) {
    case Op::index: return "int";  // an int32 element, widened where it is used
    case Op::logical_not:
    case Op::less:
    case Op::less_equal:
    case Op::greater:
    case Op::greater_equal:
    case Op::equal:
    case Op::not_equal:
    case Op::logical_and:
    case Op::logical_or: return "bool";
    default: return "fg::mask_int";
  }
}

// C for the tree under node n, reading the arrays through the checked reads;
// the nodes `hoisted` names are read from there instead.
std::string device_text(const Expression& e, int n, const std::map<int, std::string>& hoisted) {
  if (const auto found = hoisted.find(n); found != hoisted.end()) return found->second;
  const Node& node = e.nodes()[n];
  const auto operand = [&](int m) { return device_text(e, m, hoisted); };
  switch (node.op) {
    case Op::index: {
      const bool floating = e.arrays()[node.array].floating;
      return std::string(floating ? "fg::mask_floating_at" : "fg::mask_integer_at") + "(p, " +
             std::to_string(node.array) + ", " + operand(node.a) + ", fault)";
    }
    case Op::negate:
      if (node.type == Type::integer) return "fg::mask_negate(" + operand(node.a) + ")";
      return "(-" + operand(node.a) + ")";
    case Op::logical_not: return "(!" + operand(node.a) + ")";
    case Op::select:
      return "(" + operand(node.a) + " ? " + operand(node.b) + " : " + operand(node.c) + ")";
    case Op::add:
    case Op::subtract:
    case Op::multiply:
    case Op::divide:
    case Op::modulo:
      if (node.type == Type::integer) {
        const bool checked = node.op == Op::divide || node.op == Op::modulo;
        return std::string(wrapping_call(node.op)) + "(" + operand(node.a) + ", " +
               operand(node.b) + (checked ? ", fault)" : ")");
      }
      break;
    case Op::integer:
    case Op::floating:
    case Op::batch:
    case Op::head:
    case Op::query:
    case Op::key: return mask::print(e, n);  // literals and variables as the canonical text
    default: break;
  }
  // Float arithmetic, comparisons, && and ||: C's own.
  return "(" + operand(node.a) + " " + mask::symbol_of(node.op) + " " + operand(node.b) + ")";
}

// Which of q_idx and kv_idx a subtree reads: bits kQuery and kKey.
constexpr unsigned kQuery = 1, kKey = 2;

std::vector<unsigned> positions_read(const Expression& e) {
  std::vector<unsigned> read(e.nodes().size(), 0);
  // Operands have smaller numbers than the nodes that use them.
  for (std::size_t n = 0; n < e.nodes().size(); ++n) {
    const Node& node = e.nodes()[n];
    if (node.op == Op::query) read[n] = kQuery;
    if (node.op == Op::key) read[n] = kKey;
    for (int m : {node.a, node.b, node.c})
      if (m >= 0) read[n] |= read[m];
  }
  return read;
}

// The subtrees worth computing once per query or once per key: the largest
// ones that read one position at most (with b and h), where they compute
// something (an array read, arithmetic, a comparison), not a bare name.
struct Sides {
  std::vector<int> query, key;  // the hoisted nodes of each side
};

Sides hoisted_subtrees(const Expression& e) {
  const std::vector<unsigned> read = positions_read(e);
  std::vector<int> parent(e.nodes().size(), -1);
  for (std::size_t n = 0; n < e.nodes().size(); ++n)
    for (int m : {e.nodes()[n].a, e.nodes()[n].b, e.nodes()[n].c})
      if (m >= 0) parent[m] = static_cast<int>(n);
  std::vector<bool> reached(e.nodes().size(), false);
  reached[e.root()] = true;
  for (std::size_t n = e.nodes().size(); n-- > 0;)
    if (parent[n] >= 0) reached[n] = reached[parent[n]];
  Sides sides;
  for (std::size_t n = 0; n < e.nodes().size(); ++n) {
    const Node& node = e.nodes()[n];
    if (!reached[n]) continue;
    const bool computes = node.a >= 0;
    const bool largest = parent[n] < 0 || read[parent[n]] == (kQuery | kKey);
    if (!computes || !largest || read[n] == (kQuery | kKey)) continue;
    (read[n] == kKey ? sides.key : sides.query).push_back(static_cast<int>(n));
  }
  return sides;
}

// struct NAME { fields; static NAME of(p, b, h, POSITION); NAME shuffled(lane) }.
void write_side(std::ostringstream& s, const Expression& e, const std::vector<int>& nodes,
                const char* name, const char* position) {
  s << "  struct " << name << " {\n";
  for (int n : nodes) s << "    " << value_type(e.nodes()[n]) << " v" << n << ";\n";
  s << "    static __device__ __forceinline__ " << name
    << " of(const fg::AttentionParams& p, fg::mask_int b, fg::mask_int h, fg::mask_int "
    << position << ") {\n"
    << "      bool fault = false;\n      " << name << " side;\n";
  for (int n : nodes) s << "      side.v" << n << " = " << device_text(e, n, {}) << ";\n";
  s << "      (void)p, (void)b, (void)h, (void)" << position << ", (void)fault;\n"
    << "      return side;\n    }\n"
    << "    __device__ __forceinline__ " << name << " shuffled(int lane) const {\n"
    << "      " << name << " side;\n";
  for (int n : nodes) {
    const bool boolean = std::string(value_type(e.nodes()[n])) == "bool";
    s << "      side.v" << n << " = __shfl_sync(0xffffffffu, " << (boolean ? "int(" : "") << "v"
      << n << (boolean ? "), lane) != 0" : ", lane)") << ";\n";
  }
  s << "      (void)lane;\n      return side;\n    }\n  };\n";
}

}  // namespace

std::string mask_arrays_text(const std::vector<mask::ArrayName>& arrays) {
  std::string text;
  for (const mask::ArrayName& a : arrays)
    text += (text.empty() ? "" : ",") + a.name + (a.floating ? ":f" : ":i");
  return text;
}

std::vector<mask::ArrayName> parse_mask_arrays(const std::string& text) {
  std::vector<mask::ArrayName> arrays;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const std::size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon + 2 != item.size())
      throw Error(ErrorCode::invalid_argument, "KernelSpec::mask_arrays: \"" + item +
                                                   "\" is not name:i or name:f");
    arrays.push_back({item.substr(0, colon), item[colon + 1] == 'f'});
  }
  return arrays;
}

std::string user_mask_source(const KernelSpec& spec) {
  const Expression e = Expression::parse(spec.mask_mod, parse_mask_arrays(spec.mask_arrays));
  const Sides sides = hoisted_subtrees(e);
  std::map<int, std::string> hoisted;
  for (int n : sides.query) hoisted[n] = "query.v" + std::to_string(n);
  for (int n : sides.key) hoisted[n] = "key.v" + std::to_string(n);
  std::ostringstream s;
  s << "// The user mask: " << spec.mask_mod << "\n"
    << "struct UserMask {\n"
    << "  static __device__ __forceinline__ bool attends(const fg::AttentionParams& p, "
       "fg::mask_int b, fg::mask_int h, fg::mask_int q_idx, fg::mask_int kv_idx, bool& fault) {\n"
    << "    return " << device_text(e, e.root(), {}) << " != 0;\n"
    << "  }\n";
  write_side(s, e, sides.query, "QuerySide", "q_idx");
  write_side(s, e, sides.key, "KeySide", "kv_idx");
  s << "  // The verdict from the sides' values, where no pair evaluated can fault.\n"
    << "  static __device__ __forceinline__ bool attends(const fg::AttentionParams& p, "
       "fg::mask_int b, fg::mask_int h, fg::mask_int q_idx, fg::mask_int kv_idx, "
       "const QuerySide& query, const KeySide& key) {\n"
    << "    bool fault = false;\n"
    << "    (void)p, (void)b, (void)h, (void)q_idx, (void)kv_idx, (void)query, (void)key, "
       "(void)fault;\n"
    << "    return " << device_text(e, e.root(), hoisted) << " != 0;\n"
    << "  }\n"
    << "};\n\n";
  return s.str();
}

}  // namespace flashgen
