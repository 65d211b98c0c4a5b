// The mask expression's printer and its node-by-node evaluator (the rules are
// in mask_expression.hpp). The evaluator is the plain reading of the rules:
// the fp64 reference uses it, and the CPU backend's compiled form
// (cpu/mask_program.hpp) calls it to word an error it detected.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/mask_expression.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::mask {
namespace {

// 9 significant digits read back as the same float; a point or exponent
// keeps it a floating literal in C.
std::string float_literal(float value) {
  char text[48];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
  std::string s = text;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

struct Value {
  bool floating = false;
  std::int64_t i = 0;
  float f = 0.0f;
  float as_float() const { return floating ? f : static_cast<float>(i); }
  bool truth() const { return floating ? f != 0.0f : i != 0; }
};

Value integer(std::int64_t i) { return Value{false, i, 0.0f}; }
Value floating(float f) { return Value{true, 0, f}; }

// Two's-complement wrap-around for + - * (C leaves overflow undefined; the
// language defines it so every evaluator agrees).
std::int64_t wrap(std::uint64_t x) { return static_cast<std::int64_t>(x); }

class Evaluator {
 public:
  Evaluator(const BoundMask& m, const Pair& p) : m_(m), e_(m.expression), p_(p) {}

  Value eval(int n) const {
    const Node& node = e_.nodes()[n];
    switch (node.op) {
      case Op::integer: return integer(node.integer);
      case Op::floating: return floating(node.floating);
      case Op::batch: return integer(p_.b);
      case Op::head: return integer(p_.h);
      case Op::query: return integer(p_.q);
      case Op::key: return integer(p_.kv);
      case Op::index: return read(node.array, eval(node.a).i, n);
      case Op::negate: {
        const Value a = eval(node.a);
        return a.floating ? floating(-a.f) : integer(wrap(0ull - static_cast<std::uint64_t>(a.i)));
      }
      case Op::logical_not: return integer(!eval(node.a).truth());
      case Op::logical_and: return integer(eval(node.a).truth() && eval(node.b).truth());
      case Op::logical_or: return integer(eval(node.a).truth() || eval(node.b).truth());
      case Op::select: {
        const Value v = eval(node.a).truth() ? eval(node.b) : eval(node.c);
        return node.type == Type::floating ? floating(v.as_float()) : v;
      }
      default: return binary(node, n);
    }
  }

 private:
  [[noreturn]] void fault(const std::string& what) const {
    char where[160];
    std::snprintf(where, sizeof where,
                  " at b = %" PRId64 ", h = %" PRId64 ", q_idx = %" PRId64 ", kv_idx = %" PRId64,
                  p_.b, p_.h, p_.q, p_.kv);
    throw Error(ErrorCode::invalid_argument, "mask_mod: " + what + where);
  }

  // The comparisons, the same on either type; no other operator gets here.
  template <class T>
  bool compare(Op op, T x, T y) const {
    switch (op) {
      case Op::less: return x < y;
      case Op::less_equal: return x <= y;
      case Op::greater: return x > y;
      case Op::greater_equal: return x >= y;
      case Op::equal: return x == y;
      case Op::not_equal: return x != y;
      default: fault("internal error: unknown operator");
    }
  }

  Value read(int array, std::int64_t i, int n) const {
    const ArrayData& a = m_.arrays[array];
    const std::string& name = e_.arrays()[array].name;
    if (i < 0 || i >= a.size)
      fault("index " + std::to_string(i) + " of \"" + name + "\" is outside [0, " +
            std::to_string(a.size) + ") in " + print(e_, n));
    if (a.floating) return floating(static_cast<const float*>(a.data)[i * a.stride]);
    return integer(static_cast<const std::int32_t*>(a.data)[i * a.stride]);
  }

  Value binary(const Node& node, int n) const {
    const Value a = eval(node.a), b = eval(node.b);
    if (a.floating || b.floating) {
      const float x = a.as_float(), y = b.as_float();
      switch (node.op) {
        case Op::multiply: return floating(x * y);
        case Op::divide: return floating(x / y);
        case Op::add: return floating(x + y);
        case Op::subtract: return floating(x - y);
        default: return integer(compare(node.op, x, y));
      }
    }
    const std::int64_t x = a.i, y = b.i;
    const auto ux = static_cast<std::uint64_t>(x), uy = static_cast<std::uint64_t>(y);
    switch (node.op) {
      case Op::multiply: return integer(wrap(ux * uy));
      case Op::add: return integer(wrap(ux + uy));
      case Op::subtract: return integer(wrap(ux - uy));
      case Op::divide:
      case Op::modulo:
        if (y == 0) fault("integer division by zero in " + print(e_, n));
        if (x == std::numeric_limits<std::int64_t>::min() && y == -1)
          fault("integer division overflows int64 in " + print(e_, n));
        return integer(node.op == Op::divide ? x / y : x % y);
      default: return integer(compare(node.op, x, y));
    }
  }

  const BoundMask& m_;
  const Expression& e_;
  Pair p_;
};

}  // namespace

const char* symbol_of(Op op) {
  switch (op) {
    case Op::negate: return "-";
    case Op::logical_not: return "!";
    case Op::multiply: return "*";
    case Op::divide: return "/";
    case Op::modulo: return "%";
    case Op::add: return "+";
    case Op::subtract: return "-";
    case Op::less: return "<";
    case Op::less_equal: return "<=";
    case Op::greater: return ">";
    case Op::greater_equal: return ">=";
    case Op::equal: return "==";
    case Op::not_equal: return "!=";
    case Op::logical_and: return "&&";
    case Op::logical_or: return "||";
    default: return "";
  }
}

std::string print(const Expression& e, int n) {
  const Node& node = e.nodes()[n];
  switch (node.op) {
    case Op::integer: return std::to_string(node.integer) + "LL";
    case Op::floating: return float_literal(node.floating);
    case Op::batch: return "b";
    case Op::head: return "h";
    case Op::query: return "q_idx";
    case Op::key: return "kv_idx";
    case Op::index: return e.arrays()[node.array].name + "[" + print(e, node.a) + "]";
    case Op::negate:
    case Op::logical_not: return std::string("(") + symbol_of(node.op) + print(e, node.a) + ")";
    case Op::select:
      return "(" + print(e, node.a) + " ? " + print(e, node.b) + " : " + print(e, node.c) + ")";
    default:
      return "(" + print(e, node.a) + " " + symbol_of(node.op) + " " + print(e, node.b) + ")";
  }
}

bool Expression::uses(Op variable) const {
  for (const Node& n : nodes_)
    if (n.op == variable) return true;
  return false;
}

bool attends(const BoundMask& mask, const Pair& pair) {
  return Evaluator(mask, pair).eval(mask.expression.root()).truth();
}

}  // namespace flashgen::mask
