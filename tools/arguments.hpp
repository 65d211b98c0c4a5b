// Hand-written option parsing for the flashgen commands: each command
// declares its options (with help text), parses, then reads typed values.
// Bad input throws UsageError with a message naming the option and the rule.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashgen::cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Arguments {
 public:
  // synopsis: the line after "usage: flashgen <command> "; description: a paragraph.
  Arguments(std::string command, std::string synopsis, std::string description);

  // --name VALUE (or --name=VALUE); metavar names the value in the help.
  void option(const std::string& name, const std::string& metavar, const std::string& help);
  // --name without a value.
  void flag(const std::string& name, const std::string& help);

  // Parses the words after the command name. Returns false when --help was
  // given (the usage is printed on stdout); throws UsageError otherwise.
  bool parse(const std::vector<std::string>& words);

  bool given(const std::string& name) const;  // an option or a flag appeared
  void require(const std::string& name) const;  // throws UsageError unless given
  std::string text(const std::string& name, const std::string& fallback) const;
  std::string choice(const std::string& name, const std::string& fallback,
                     const std::vector<std::string>& allowed) const;
  std::int64_t integer(const std::string& name, std::int64_t fallback, std::int64_t minimum,
                       std::int64_t maximum = std::numeric_limits<std::int64_t>::max()) const;
  double number(const std::string& name, double fallback, double exclusive_minimum) const;
  // "64,128,256": each integer in [minimum, maximum].
  std::vector<std::int64_t> integer_list(const std::string& name,
                                         const std::vector<std::int64_t>& fallback,
                                         std::int64_t minimum, std::int64_t maximum) const;
  // "forward,backward": each item one of `allowed`.
  std::vector<std::string> choice_list(const std::string& name,
                                       const std::vector<std::string>& fallback,
                                       const std::vector<std::string>& allowed) const;

  std::string usage() const;
  const std::string& command() const { return command_; }

 private:
  struct Spec {
    std::string metavar;  // empty for a flag
    std::string help;
  };
  [[noreturn]] void fail(const std::string& message) const;
  const Spec& spec(const std::string& name) const;

  std::string command_, synopsis_, description_;
  std::vector<std::string> order_;        // declaration order, for the help
  std::map<std::string, Spec> specs_;     // by name without "--"
  std::map<std::string, std::string> values_;
};

// Parses a whole integer (no trailing characters); false on failure or overflow.
bool parse_integer(const std::string& text, std::int64_t* value);

}  // namespace flashgen::cli
