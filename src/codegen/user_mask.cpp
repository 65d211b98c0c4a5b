#include "codegen/user_mask.hpp"

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

// C for the tree under node n, reading the arrays through the checked reads.
std::string device_text(const Expression& e, int n) {
  const Node& node = e.nodes()[n];
  const auto operand = [&](int m) { return device_text(e, m); };
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
  std::ostringstream s;
  s << "// The user mask: " << spec.mask_mod << "\n"
    << "struct UserMask {\n"
    << "  static __device__ __forceinline__ bool attends(const fg::AttentionParams& p, "
       "fg::mask_int b, fg::mask_int h, fg::mask_int q_idx, fg::mask_int kv_idx, bool& fault) {\n"
    << "    return " << device_text(e, e.root()) << " != 0;\n"
    << "  }\n"
    << "};\n\n";
  return s.str();
}

}  // namespace flashgen
