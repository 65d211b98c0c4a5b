// The mask expression language: what parses, its canonical text, what is
// refused and how the refusal reads, and the node-by-node evaluator's C
// semantics (the CPU backend's compiled form is checked against it in
// tests/cpu/mask_mod_test.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/mask_expression.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::mask {
namespace {

const std::vector<ArrayName> kArrays = {{"doc", false}, {"prefix", false}, {"bias", true}};

std::string canonical(const std::string& text) {
  return Expression::parse(text, kArrays).canonical();
}

// The message of the refusal of `text`, "" when it parses.
std::string refusal(const std::string& text, std::vector<ArrayName> arrays = kArrays) {
  try {
    Expression::parse(text, std::move(arrays));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

void expect_refused(const std::string& text, const std::string& fragment) {
  const std::string message = refusal(text);
  EXPECT_NE(message.find(fragment), std::string::npos)
      << "expression: " << text << "\nmessage: " << message << "\nexpected: " << fragment;
  EXPECT_EQ(message.rfind("mask_mod: ", 0), 0u) << message;
}

TEST(MaskExpression, CanonicalTextIsFullyParenthesised) {
  EXPECT_EQ(canonical("doc[kv_idx] == doc[q_idx]"), "(doc[kv_idx] == doc[q_idx])");
  EXPECT_EQ(canonical("kv_idx < prefix[b] || kv_idx <= q_idx"),
            "((kv_idx < prefix[b]) || (kv_idx <= q_idx))");
  // C's precedence and left associativity.
  EXPECT_EQ(canonical("1 + 2 * 3 - 4 % 5"), "((1LL + (2LL * 3LL)) - (4LL % 5LL))");
  EXPECT_EQ(canonical("q_idx - kv_idx - 1"), "((q_idx - kv_idx) - 1LL)");
  EXPECT_EQ(canonical("!(h == 0) && -b < 1"),
            "((!(h == 0LL)) && ((-b) < 1LL))");
  EXPECT_EQ(canonical("b ? h : q_idx ? 1 : 2"), "(b ? h : (q_idx ? 1LL : 2LL))");
  EXPECT_EQ(canonical("bias[h] > 0.5"), "(bias[h] > 0.5f)");
  EXPECT_EQ(canonical("(((kv_idx)))"), "kv_idx");
  EXPECT_EQ(canonical("doc[doc[kv_idx] + 1] != 0"), "(doc[(doc[kv_idx] + 1LL)] != 0LL)");
  // Floating literals keep a point or an exponent and read back exactly.
  EXPECT_EQ(canonical("bias[0] < 2.0"), "(bias[0LL] < 2.0f)");
  EXPECT_EQ(canonical("bias[0] < 1e-5f"), "(bias[0LL] < 9.99999975e-06f)");
  EXPECT_EQ(canonical("bias[0] < .25"), "(bias[0LL] < 0.25f)");
  // The canonical text parses to itself.
  for (const char* text : {"doc[kv_idx] == doc[q_idx]", "b ? h : q_idx ? 1 : 2",
                           "bias[h] * 3 > -0.125 || !(kv_idx % 4)", "q_idx * 0 != 0"})
    EXPECT_EQ(canonical(canonical(text)), canonical(text)) << text;
}

TEST(MaskExpression, TypesFollowC) {
  const Expression e = Expression::parse("bias[h] + 1", kArrays);
  EXPECT_EQ(e.nodes()[e.root()].type, Type::floating);
  const Expression c = Expression::parse("bias[h] < 1", kArrays);
  EXPECT_EQ(c.nodes()[c.root()].type, Type::integer);
  const Expression s = Expression::parse("b ? 1 : 0.5", kArrays);
  EXPECT_EQ(s.nodes()[s.root()].type, Type::floating);
  EXPECT_TRUE(e.uses(Op::head));
  EXPECT_FALSE(e.uses(Op::query));
}

TEST(MaskExpression, RefusesWhatIsOutsideTheLanguage) {
  expect_refused("foo[kv_idx] == 1", "unknown name \"foo\" at column 1; the names are b, h, "
                                     "q_idx, kv_idx and the mask_tensors (doc, prefix, bias)");
  expect_refused("kv_idx <= q_idx && foo", "unknown name \"foo\" at column 20");
  expect_refused("abs(q_idx - kv_idx) < 4", "calls are not allowed (\"abs(\") at column 1");
  expect_refused("q_idx = kv_idx", "\"=\": assignment is not allowed (compare with ==) at column 7");
  expect_refused("q_idx++ > 0", "\"++\": increment is not allowed at column 6");
  expect_refused("q_idx, kv_idx", "the comma operator is not allowed at column 6");
  expect_refused("*doc", "pointer dereference is not allowed at column 1");
  expect_refused("&doc", "address-of");
  expect_refused("doc->x", "member access is not allowed");
  expect_refused("q_idx & 1", "bitwise");
  expect_refused("q_idx << 1", "shifts are not supported");
  expect_refused("\"doc\" == 1", "strings are not allowed at column 1");
  expect_refused("(int)bias[0]", "casts are not allowed at column 2");
  expect_refused("doc == 1", "mask tensor \"doc\" must be indexed, as doc[...]");
  expect_refused("q_idx[0]", "\"q_idx\" is not an array at column 6");
  expect_refused("doc[bias[0]]", "the index of \"doc\" must be an integer expression at column 5");
  expect_refused("bias[0] % 2", "\"%\" needs integer operands");
  expect_refused("", "the expression is empty");
  expect_refused("q_idx <", "expected a number, a name or \"(\", found end of expression at column 8");
  expect_refused("(q_idx", "expected \")\", found end of expression");
  expect_refused("q_idx kv_idx", "unexpected \"kv_idx\" at column 7");
  expect_refused("b ? h", "expected \":\" of the conditional operator");
  expect_refused("+q_idx", "unary plus");
  expect_refused("010 < q_idx", "leading zeros");
  expect_refused("0x10 < q_idx", "leading zeros");
  expect_refused("5u < q_idx", "\"5u\" is not a decimal integer");
  expect_refused("99999999999999999999 < q_idx", "does not fit in int64");
  expect_refused("1e99 < bias[0]", "out of float's range");
  expect_refused("q_idx @ 1", "unexpected character \"@\" at column 7");
  expect_refused(std::string(300, '(') + "1" + std::string(300, ')'), "nested too deeply");
  // Without arrays the message lists the variables alone.
  EXPECT_NE(refusal("doc[0]", {}).find("the names are b, h, q_idx, kv_idx"), std::string::npos);
  EXPECT_EQ(refusal("doc[0]", {}).find("mask_tensors"), std::string::npos);
}

// Evaluates `text` at `pair` with doc = {0, 0, 1, 1, 1}, prefix = {2, 3},
// bias = {0.5, -1.5}.
bool attends_at(const std::string& text, Pair pair) {
  static const std::int32_t doc[] = {0, 0, 1, 1, 1}, prefix[] = {2, 3};
  static const float bias[] = {0.5f, -1.5f};
  const BoundMask m{Expression::parse(text, kArrays),
                    {{doc, false, 5, 1}, {prefix, false, 2, 1}, {bias, true, 2, 1}}};
  return attends(m, pair);
}

std::string fault_at(const std::string& text, Pair pair) {
  try {
    attends_at(text, pair);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(MaskExpression, EvaluatesWithCSemantics) {
  EXPECT_TRUE(attends_at("doc[kv_idx] == doc[q_idx]", {0, 0, 2, 4}));
  EXPECT_FALSE(attends_at("doc[kv_idx] == doc[q_idx]", {0, 0, 1, 4}));
  EXPECT_TRUE(attends_at("kv_idx < prefix[b] || kv_idx <= q_idx", {1, 0, 0, 2}));
  EXPECT_FALSE(attends_at("kv_idx < prefix[b] || kv_idx <= q_idx", {0, 0, 0, 2}));
  EXPECT_TRUE(attends_at("-7 / 2 == -3 && -7 % 2 == -1", {}));  // truncation toward zero
  EXPECT_TRUE(attends_at("7 / 2 * 2.0 == 6.0", {}));             // int division, then float
  EXPECT_TRUE(attends_at("bias[0] * 3 == 1.5", {}));
  EXPECT_TRUE(attends_at("bias[1]", {}));                        // nonzero float is true
  EXPECT_TRUE(attends_at("!(bias[0] - 0.5)", {}));
  EXPECT_TRUE(attends_at("(q_idx < 2 ? bias[0] : 2) == 0.5", {}));
  EXPECT_TRUE(attends_at("9223372036854775807 + 1 < 0", {}));  // wraps
  // Short circuits: the index out of range is never evaluated.
  EXPECT_FALSE(attends_at("kv_idx < 5 && doc[kv_idx] == 1", {0, 0, 0, 9}));
  EXPECT_TRUE(attends_at("kv_idx >= 5 || doc[kv_idx] == 1", {0, 0, 0, 9}));
  EXPECT_FALSE(attends_at("kv_idx < 5 ? doc[kv_idx] : 0", {0, 0, 0, 9}));
  EXPECT_TRUE(attends_at("kv_idx == 0 || q_idx / kv_idx < 1", {0, 0, 3, 0}));
}

TEST(MaskExpression, EvaluationFaultsNameTheRuleAndThePair) {
  const std::string range = fault_at("doc[kv_idx] == doc[q_idx]", {1, 2, 3, 7});
  EXPECT_NE(range.find("mask_mod: index 7 of \"doc\" is outside [0, 5) in doc[kv_idx] at b = 1, "
                       "h = 2, q_idx = 3, kv_idx = 7"),
            std::string::npos)
      << range;
  EXPECT_NE(fault_at("doc[q_idx - 1] == 0", {0, 0, 0, 0}).find("index -1 of \"doc\""),
            std::string::npos);
  EXPECT_NE(fault_at("q_idx % kv_idx == 0", {0, 0, 3, 0}).find("integer division by zero in (q_idx % kv_idx)"),
            std::string::npos);
  EXPECT_NE(fault_at("(q_idx - 9223372036854775807 - 1) / -1 == 0", {}).find("overflows int64"),
            std::string::npos);
  EXPECT_EQ(fault_at("q_idx / 0.0 > 0", {0, 0, 1, 0}), "");  // float division: IEEE, no fault
}

}  // namespace
}  // namespace flashgen::mask
