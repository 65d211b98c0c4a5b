// The mask program's compiler (expression tree to postfix code) and its
// driver; mask_program_run.cpp runs the code.
#include "cpu/mask_program.hpp"

#include <algorithm>
#include <limits>

#include "cpu/tile_math.hpp"

namespace flashgen::cpu {

using mask::Node;
using mask::Op;
using mask::Type;

namespace {

using Code = MaskProgram::Code;
using Instruction = MaskProgram::Instruction;

// Postfix code of node n, converted to type `want` (C's usual conversions);
// returns the stack depth it needs.
struct Compiler {
  const mask::Expression& e;
  std::vector<Instruction>& out;

  int operand(int n, Type want) {
    const int depth = node(n);
    if (want == Type::floating && e.nodes()[n].type == Type::integer) out.push_back({Code::to_float});
    return depth;
  }
  int condition(int n) {
    const int depth = node(n);
    if (e.nodes()[n].type == Type::floating) out.push_back({Code::truth});
    return depth;
  }
  int node(int n) {
    const Node& x = e.nodes()[n];
    switch (x.op) {
      case Op::integer: out.push_back({Code::push_integer, x.integer}); return 1;
      case Op::floating: out.push_back({Code::push_float, 0, x.floating}); return 1;
      case Op::batch: out.push_back({Code::push_variable, 0}); return 1;
      case Op::head: out.push_back({Code::push_variable, 1}); return 1;
      case Op::query: out.push_back({Code::push_variable, 2}); return 1;
      case Op::key: out.push_back({Code::push_variable, 3}); return 1;
      case Op::index: {
        const int depth = node(x.a);
        out.push_back({Code::index, 0, 0.0f, x.array});
        return depth;
      }
      case Op::negate: {
        const int depth = node(x.a);
        out.push_back({x.type == Type::floating ? Code::negate_f : Code::negate_i});
        return depth;
      }
      case Op::logical_not: {
        const int depth = condition(x.a);
        out.push_back({Code::logical_not});
        return depth;
      }
      case Op::logical_and:
      case Op::logical_or: {
        const int a = condition(x.a);  // a's code first: arguments have no order
        const int depth = std::max(a, 1 + condition(x.b));
        out.push_back({x.op == Op::logical_and ? Code::logical_and : Code::logical_or});
        return depth;
      }
      case Op::select: {
        const int a = condition(x.a), b = operand(x.b, x.type), c = operand(x.c, x.type);
        out.push_back({Code::select, x.type == Type::floating});
        return std::max({a, 1 + b, 2 + c});
      }
      default: break;
    }
    // Binary arithmetic and comparisons: in float when either side is.
    const bool floating = e.nodes()[x.a].type == Type::floating || e.nodes()[x.b].type == Type::floating;
    const Type want = floating ? Type::floating : Type::integer;
    const int left = operand(x.a, want);  // a's code first: arguments have no order
    const int depth = std::max(left, 1 + operand(x.b, want));
    struct Binary {
      Op op;
      Code integer, floating;  // modulo takes integers only (the parser's rule)
    };
    static constexpr Binary kBinary[] = {
        {Op::add, Code::add_i, Code::add_f},
        {Op::subtract, Code::subtract_i, Code::subtract_f},
        {Op::multiply, Code::multiply_i, Code::multiply_f},
        {Op::divide, Code::divide_i, Code::divide_f},
        {Op::modulo, Code::modulo_i, Code::modulo_i},
        {Op::less, Code::less_i, Code::less_f},
        {Op::less_equal, Code::less_equal_i, Code::less_equal_f},
        {Op::greater, Code::greater_i, Code::greater_f},
        {Op::greater_equal, Code::greater_equal_i, Code::greater_equal_f},
        {Op::equal, Code::equal_i, Code::equal_f},
        {Op::not_equal, Code::not_equal_i, Code::not_equal_f}};
    for (const Binary& b : kBinary)
      if (b.op == x.op) out.push_back({floating ? b.floating : b.integer});
    return depth;
  }
};

}  // namespace

MaskProgram::MaskProgram(const Problem& p) : p_(p) {
  const mask::Expression& e = p.mask->expression;
  Compiler c{e, code_};
  depth_ = c.condition(e.root());  // the result as 0 / 1
}

int MaskProgram::evaluate(std::int64_t batch, std::int64_t head, std::int64_t query0,
                          std::int64_t query_step, std::int64_t key0, std::int64_t key_step, int n,
                          std::uint8_t* attend) const {
  int count = 0;
  for (int first = 0; first < n; first += kMaskLanes) {
    const int lanes = std::min(kMaskLanes, n - first);
    const std::int64_t base[4] = {p_.mask_batch0 + batch, head, query0 + query_step * first,
                                  key0 + key_step * first};
    const std::int64_t step[4] = {0, 0, query_step, key_step};
    count += chunk(base, step, lanes, attend + first);
  }
  return count;
}

void mask_scores(float* scores, const std::uint8_t* attend, int begin, int end) {
  for (int c = begin; c < end; ++c) scores[c] = attend[c] != 0 ? scores[c] : kMaskedScore;
}

}  // namespace flashgen::cpu
