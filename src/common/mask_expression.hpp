// User mask expressions (Options::mask_mod): a small, safe subset of C over
// the names b, h, q_idx, kv_idx and the arrays of Options::mask_tensors.
//
//   expr     := cond
//   cond     := or ('?' cond ':' cond)?
//   or       := and ('||' and)*          and := equality ('&&' equality)*
//   equality := relation (('==' | '!=') relation)*
//   relation := sum (('<' | '<=' | '>' | '>=') sum)*
//   sum      := product (('+' | '-') product)*
//   product  := unary (('*' | '/' | '%') unary)*
//   unary    := ('-' | '!') unary | primary
//   primary  := integer | floating | name | array '[' expr ']' | '(' expr ')'
//
// Types follow C with int64 integers: b, h, q_idx, kv_idx, integer literals
// and int32 array elements (widened) are int64; floating literals and fp32
// array elements are float; an operator with a float operand is float
// (int64 converted as C converts it); comparisons, !, && and || give 0 or 1.
// % and array indices take integers only. Integer division truncates toward
// zero; division by zero (and INT64_MIN / -1) is an error at evaluation, as
// is an index outside [0, size). Integer overflow otherwise wraps. && || ?:
// evaluate only the operands C evaluates, so `i < n && a[i]` is safe.
//
// Nothing else parses: calls, assignment, ++/--, the comma, pointer and
// member operators, bitwise operators, casts, strings, and names that are not
// listed are refused with the column of the problem.
//
// canonical() re-prints the expression from its tree, fully parenthesised,
// integer literals with LL and floating ones with f (9 significant digits, so
// they read back exactly): C with the meaning above once b, h, q_idx, kv_idx
// are int64 and the arrays read as int64 or float. That text is what a kernel
// generator splices and what identifies a mask in a cache key.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashgen::mask {

enum class Type : std::uint8_t { integer, floating };

enum class Op : std::uint8_t {
  integer, floating,                 // literals
  batch, head, query, key,           // b, h, q_idx, kv_idx
  index,                             // array[a]
  negate, logical_not,               // -a, !a
  multiply, divide, modulo, add, subtract,
  less, less_equal, greater, greater_equal, equal, not_equal,
  logical_and, logical_or,
  select,                            // a ? b : c
};

struct Node {
  Op op = Op::integer;
  Type type = Type::integer;
  std::int64_t integer = 0;  // Op::integer's value
  float floating = 0.0f;     // Op::floating's value
  int array = -1;            // Op::index: which array
  int a = -1, b = -1, c = -1;  // operands (node numbers)
};

// An array the expression may name: its name and whether its elements are float.
struct ArrayName {
  std::string name;
  bool floating = false;
};

class Expression {
 public:
  // Throws flashgen::Error(invalid_argument), "mask_mod: <problem> at column
  // <n>; ...", for anything outside the language.
  static Expression parse(std::string_view text, std::vector<ArrayName> arrays);

  const std::vector<Node>& nodes() const { return nodes_; }
  int root() const { return root_; }
  const std::vector<ArrayName>& arrays() const { return arrays_; }
  const std::string& canonical() const { return canonical_; }
  // Whether the expression reads the name (the variables and the arrays).
  bool uses(Op variable) const;

 private:
  friend class Parser;
  std::vector<Node> nodes_;
  int root_ = -1;
  std::vector<ArrayName> arrays_;
  std::string canonical_;
};

// C's symbol of an operator ("-", "!", "*", ... "||"); "" for the others.
const char* symbol_of(Op op);

// The canonical text of the tree under `node`.
std::string print(const Expression& e, int node);

// The arrays' memory, in the order of Expression::arrays(): host data.
struct ArrayData {
  const void* data = nullptr;
  bool floating = false;
  std::int64_t size = 0, stride = 1;
};

// Where a pair is: batch (or sequence), query head, query and key positions.
struct Pair {
  std::int64_t b = 0, h = 0, q = 0, kv = 0;
};

// An expression with its arrays bound: what a Problem carries.
struct BoundMask {
  Expression expression;
  std::vector<ArrayData> arrays;
};

// Whether `pair` is attended, evaluated node by node with C's order and
// short circuits (the reference's evaluator, and the one that words errors).
// Throws flashgen::Error(invalid_argument) naming the fault and the pair.
bool attends(const BoundMask& mask, const Pair& pair);

}  // namespace flashgen::mask
