// The mask expression's tokenizer and recursive-descent parser
// (mask_expression.hpp has the grammar). Each refusal names what was found
// and its column (1-based), and the names the expression may use.
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

#include "common/mask_expression.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::mask {
namespace {

enum class Kind { number, name, symbol, end };

struct Token {
  Kind kind = Kind::end;
  std::string text;
  std::size_t column = 0;  // 1-based
};

// Deeper nesting than this is refused rather than risking the stack.
constexpr int kMaxDepth = 256;

// Two-character operators first; then the single ones. Anything else C has
// is listed with the reason it is refused.
constexpr const char* kPairs[] = {"<=", ">=", "==", "!=", "&&", "||"};
constexpr const char* kSingles = "()[]?:!-+*/%<>";
struct Refused {
  const char* text;
  const char* why;
};
constexpr Refused kRefused[] = {
    {"++", "increment is not allowed"}, {"--", "decrement is not allowed"},
    {"->", "member access is not allowed"}, {"<<", "shifts are not supported"},
    {">>", "shifts are not supported"}, {"=", "assignment is not allowed (compare with ==)"},
    {",", "the comma operator is not allowed"}, {"&", "bitwise and address-of operators are not supported (use &&)"},
    {"|", "bitwise operators are not supported (use ||)"}, {"^", "bitwise operators are not supported"},
    {"~", "bitwise operators are not supported"}, {".", "member access is not allowed"},
    {"\"", "strings are not allowed"}, {"'", "character literals are not allowed"},
    {";", "statements are not allowed"}, {"{", "statements are not allowed"},
    {"}", "statements are not allowed"}, {"#", "preprocessor directives are not allowed"},
    {"\\", "backslashes are not allowed"},
};

}  // namespace

class Parser {
 public:
  Parser(std::string_view text, Expression& out) : text_(text), out_(out) {}

  void run() {
    tokenize();
    if (peek().kind == Kind::end) fail_at(peek(), "the expression is empty");
    out_.root_ = conditional(0);
    if (peek().kind != Kind::end) fail_at(peek(), "unexpected " + describe(peek()));
  }

 private:
  [[noreturn]] void fail_at(const Token& t, const std::string& what) const {
    std::string names = "b, h, q_idx, kv_idx";
    if (!out_.arrays_.empty()) {
      names += " and the mask_tensors (";
      for (std::size_t i = 0; i < out_.arrays_.size(); ++i)
        names += (i ? ", " : "") + out_.arrays_[i].name;
      names += ")";
    }
    throw Error(ErrorCode::invalid_argument, "mask_mod: " + what + " at column " +
                                                 std::to_string(t.column) + "; the names are " +
                                                 names);
  }

  static std::string describe(const Token& t) {
    if (t.kind == Kind::end) return "end of expression";
    return "\"" + t.text + "\"";
  }

  void tokenize() {
    std::size_t i = 0;
    while (i < text_.size()) {
      const char c = text_[i];
      Token t;
      t.column = i + 1;
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && i + 1 < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i + 1])))) {
        std::size_t j = i;
        // Digits, a point, an exponent with its sign, letters (suffixes,
        // checked by number()).
        while (j < text_.size() &&
               (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '.' ||
                text_[j] == '_' ||
                ((text_[j] == '+' || text_[j] == '-') && (text_[j - 1] == 'e' || text_[j - 1] == 'E'))))
          ++j;
        t.kind = Kind::number;
        t.text = std::string(text_.substr(i, j - i));
        i = j;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t j = i;
        while (j < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '_')) ++j;
        t.kind = Kind::name;
        t.text = std::string(text_.substr(i, j - i));
        i = j;
      } else {
        t.kind = Kind::symbol;
        for (const Refused& r : kRefused) {
          const std::string_view s(r.text);
          if (text_.substr(i, s.size()) == s && !is_pair_at(i)) {
            t.text = std::string(s);
            // A quote is not echoed inside quotes.
            fail_at(t, t.text == "\"" || t.text == "'" ? std::string(r.why)
                                                      : "\"" + t.text + "\": " + r.why);
          }
        }
        if (is_pair_at(i)) {
          t.text = std::string(text_.substr(i, 2));
          i += 2;
        } else if (std::string_view(kSingles).find(c) != std::string_view::npos) {
          t.text = std::string(1, c);
          ++i;
        } else {
          t.text = std::string(1, c);
          fail_at(t, "unexpected character \"" + t.text + "\"");
        }
      }
      tokens_.push_back(std::move(t));
    }
    Token end;
    end.column = text_.size() + 1;
    tokens_.push_back(end);
  }

  bool is_pair_at(std::size_t i) const {
    for (const char* p : kPairs)
      if (text_.substr(i, 2) == p) return true;
    return false;
  }

  const Token& peek() const { return tokens_[at_]; }
  bool accept(const char* symbol) {
    if (peek().kind == Kind::symbol && peek().text == symbol) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(const char* symbol, const char* what) {
    if (!accept(symbol)) fail_at(peek(), std::string("expected ") + what + ", found " + describe(peek()));
  }

  int add(Node n) {
    out_.nodes_.push_back(n);
    return static_cast<int>(out_.nodes_.size()) - 1;
  }
  Type type_of(int n) const { return out_.nodes_[n].type; }
  static Type wider(Type a, Type b) {
    return a == Type::floating || b == Type::floating ? Type::floating : Type::integer;
  }
  int binary(Op op, int a, int b, const Token& at) {
    Node n;
    n.op = op, n.a = a, n.b = b;
    if (op == Op::modulo && (type_of(a) == Type::floating || type_of(b) == Type::floating))
      fail_at(at, "\"%\" needs integer operands (a float operand was found)");
    const bool arithmetic = op == Op::multiply || op == Op::divide || op == Op::modulo ||
                            op == Op::add || op == Op::subtract;
    n.type = arithmetic ? wider(type_of(a), type_of(b)) : Type::integer;
    return add(n);
  }

  // Each level: its operators, left-associative, over the next level.
  struct Level {
    const char* symbols[4];
    Op ops[4];
  };

  int conditional(int depth) {
    if (depth > kMaxDepth) fail_at(peek(), "the expression is nested too deeply");
    const int condition = binary_level(0, depth);
    const Token at = peek();
    if (!accept("?")) return condition;
    const int yes = conditional(depth + 1);
    expect(":", "\":\" of the conditional operator");
    const int no = conditional(depth + 1);
    Node n;
    n.op = Op::select, n.a = condition, n.b = yes, n.c = no;
    n.type = wider(type_of(yes), type_of(no));
    return add(n);
  }

  int binary_level(int level, int depth) {
    static constexpr Level kLevels[] = {
        {{"||"}, {Op::logical_or}},
        {{"&&"}, {Op::logical_and}},
        {{"==", "!="}, {Op::equal, Op::not_equal}},
        {{"<", "<=", ">", ">="}, {Op::less, Op::less_equal, Op::greater, Op::greater_equal}},
        {{"+", "-"}, {Op::add, Op::subtract}},
        {{"*", "/", "%"}, {Op::multiply, Op::divide, Op::modulo}},
    };
    constexpr int kLevelCount = sizeof(kLevels) / sizeof(kLevels[0]);
    if (level == kLevelCount) return unary(depth);
    int left = binary_level(level + 1, depth);
    for (;;) {
      const Token at = peek();
      int found = -1;
      for (int i = 0; i < 4 && kLevels[level].symbols[i] != nullptr; ++i)
        if (accept(kLevels[level].symbols[i])) {
          found = i;
          break;
        }
      if (found < 0) return left;
      const int right = binary_level(level + 1, depth);
      left = binary(kLevels[level].ops[found], left, right, at);
    }
  }

  int unary(int depth) {
    if (depth > kMaxDepth) fail_at(peek(), "the expression is nested too deeply");
    const Token at = peek();
    if (accept("-") || accept("!")) {
      Node n;
      n.op = at.text == "-" ? Op::negate : Op::logical_not;
      n.a = unary(depth + 1);
      n.type = n.op == Op::negate ? type_of(n.a) : Type::integer;
      return add(n);
    }
    if (accept("*")) fail_at(at, "\"*\": pointer dereference is not allowed");
    if (accept("+")) fail_at(at, "unexpected \"+\" (unary plus is not part of the language)");
    return primary(depth);
  }

  int primary(int depth) {
    const Token t = peek();
    if (accept("(")) {
      if (peek().kind == Kind::name && (peek().text == "int" || peek().text == "float" ||
                                        peek().text == "long" || peek().text == "double"))
        fail_at(peek(), "casts are not allowed");
      const int inner = conditional(depth + 1);
      expect(")", "\")\"");
      return inner;
    }
    if (t.kind == Kind::number) {
      ++at_;
      return number(t);
    }
    if (t.kind != Kind::name) fail_at(t, "expected a number, a name or \"(\", found " + describe(t));
    ++at_;
    if (peek().kind == Kind::symbol && peek().text == "(")
      fail_at(t, "calls are not allowed (\"" + t.text + "(\")");
    static constexpr std::pair<const char*, Op> kVariables[] = {
        {"b", Op::batch}, {"h", Op::head}, {"q_idx", Op::query}, {"kv_idx", Op::key}};
    for (const auto& [name, op] : kVariables) {
      if (t.text != name) continue;
      if (peek().kind == Kind::symbol && peek().text == "[")
        fail_at(peek(), "\"" + t.text + "\" is not an array");
      Node n;
      n.op = op;
      return add(n);
    }
    for (std::size_t i = 0; i < out_.arrays_.size(); ++i) {
      if (t.text != out_.arrays_[i].name) continue;
      if (!accept("["))
        fail_at(t, "mask tensor \"" + t.text + "\" must be indexed, as " + t.text + "[...]");
      const Token index_at = peek();
      Node n;
      n.op = Op::index;
      n.array = static_cast<int>(i);
      n.a = conditional(depth + 1);
      if (type_of(n.a) != Type::integer)
        fail_at(index_at, "the index of \"" + t.text + "\" must be an integer expression");
      expect("]", "\"]\"");
      n.type = out_.arrays_[i].floating ? Type::floating : Type::integer;
      return add(n);
    }
    fail_at(t, "unknown name \"" + t.text + "\"");
  }

  int number(const Token& t) {
    const std::string& s = t.text;
    const bool floating = s.find_first_of(".eE") != std::string::npos ||
                          (s.size() > 1 && (s.back() == 'f' || s.back() == 'F'));
    Node n;
    if (!floating) {
      // LL (the canonical text's suffix) says int64, which every integer is.
      const bool long_long = s.size() > 2 && (s.ends_with("LL") || s.ends_with("ll"));
      const std::size_t digits = long_long ? s.size() - 2 : s.size();
      if (digits > 1 && s[0] == '0')
        fail_at(t, "\"" + s + "\": leading zeros (C's octal and hex) are not supported");
      std::int64_t value = 0;
      const auto [end, error] = std::from_chars(s.data(), s.data() + digits, value);
      if (error == std::errc::result_out_of_range)
        fail_at(t, "integer literal \"" + s + "\" does not fit in int64");
      if (error != std::errc() || end != s.data() + digits)
        fail_at(t, "\"" + s + "\" is not a decimal integer (integers are int64; no suffix but LL)");
      n.op = Op::integer, n.integer = value;
      return add(n);
    }
    const std::size_t digits = s.back() == 'f' || s.back() == 'F' ? s.size() - 1 : s.size();
    float value = 0.0f;
    const auto [end, error] = std::from_chars(s.data(), s.data() + digits, value);
    if (error == std::errc::result_out_of_range || (error == std::errc() && !std::isfinite(value)))
      fail_at(t, "floating literal \"" + s + "\" is out of float's range");
    if (error != std::errc() || end != s.data() + digits)
      fail_at(t, "\"" + s + "\" is not a floating literal");
    n.op = Op::floating, n.type = Type::floating, n.floating = value;
    return add(n);
  }

  std::string_view text_;
  Expression& out_;
  std::vector<Token> tokens_;
  std::size_t at_ = 0;
};

Expression Expression::parse(std::string_view text, std::vector<ArrayName> arrays) {
  Expression e;
  e.arrays_ = std::move(arrays);
  Parser(text, e).run();
  e.canonical_ = print(e, e.root_);
  return e;
}

}  // namespace flashgen::mask
