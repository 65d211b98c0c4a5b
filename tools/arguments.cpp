#include "arguments.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace flashgen::cli {

bool parse_integer(const std::string& text, std::int64_t* value) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') return false;
  *value = parsed;
  return true;
}

namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream stream(text);
  while (std::getline(stream, item, separator)) items.push_back(item);
  return items;
}

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i) text += (i ? separator : "") + items[i];
  return text;
}

}  // namespace

Arguments::Arguments(std::string command, std::string synopsis, std::string description)
    : command_(std::move(command)),
      synopsis_(std::move(synopsis)),
      description_(std::move(description)) {}

void Arguments::option(const std::string& name, const std::string& metavar,
                       const std::string& help) {
  order_.push_back(name);
  specs_[name] = {metavar, help};
}

void Arguments::flag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  specs_[name] = {"", help};
}

void Arguments::fail(const std::string& message) const {
  throw UsageError("flashgen " + command_ + ": " + message);
}

const Arguments::Spec& Arguments::spec(const std::string& name) const {
  const auto found = specs_.find(name);
  if (found == specs_.end()) fail("internal: option --" + name + " was never declared");
  return found->second;
}

bool Arguments::parse(const std::vector<std::string>& words) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "--help" || word == "-h") {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    if (word.rfind("--", 0) != 0)
      fail("unexpected argument '" + word + "' (options start with --; see --help)");
    std::string name = word.substr(2);
    std::string value;
    bool has_inline_value = false;
    if (const std::size_t equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
      has_inline_value = true;
    }
    const auto found = specs_.find(name);
    if (found == specs_.end()) fail("unknown option --" + name + " (see --help)");
    const bool is_flag = found->second.metavar.empty();
    if (is_flag) {
      if (has_inline_value) fail("--" + name + " takes no value");
      values_[name] = "1";
      continue;
    }
    if (!has_inline_value) {
      if (i + 1 >= words.size()) fail("--" + name + " needs a value (" + found->second.metavar + ")");
      value = words[++i];
    }
    values_[name] = value;
  }
  return true;
}

bool Arguments::given(const std::string& name) const {
  spec(name);
  return values_.count(name) != 0;
}

void Arguments::require(const std::string& name) const {
  if (!given(name)) fail("--" + name + " is required (see --help)");
}

std::string Arguments::text(const std::string& name, const std::string& fallback) const {
  spec(name);
  const auto found = values_.find(name);
  return found == values_.end() ? fallback : found->second;
}

std::string Arguments::choice(const std::string& name, const std::string& fallback,
                              const std::vector<std::string>& allowed) const {
  const std::string value = text(name, fallback);
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end())
    fail("--" + name + " must be one of " + joined(allowed, ", ") + ", got '" + value + "'");
  return value;
}

std::int64_t Arguments::integer(const std::string& name, std::int64_t fallback,
                                std::int64_t minimum, std::int64_t maximum) const {
  if (!given(name)) return fallback;
  const std::string value = text(name, "");
  std::int64_t parsed = 0;
  if (!parse_integer(value, &parsed)) fail("--" + name + " expects an integer, got '" + value + "'");
  if (parsed < minimum || parsed > maximum)
    fail("--" + name + " must be in [" + std::to_string(minimum) + ", " + std::to_string(maximum) +
         "], got " + value);
  return parsed;
}

double Arguments::number(const std::string& name, double fallback,
                         double exclusive_minimum) const {
  if (!given(name)) return fallback;
  const std::string value = text(name, "");
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(parsed))
    fail("--" + name + " expects a number, got '" + value + "'");
  if (!(parsed > exclusive_minimum))
    fail("--" + name + " must be > " + std::to_string(exclusive_minimum) + ", got " + value);
  return parsed;
}

std::vector<std::int64_t> Arguments::integer_list(const std::string& name,
                                                  const std::vector<std::int64_t>& fallback,
                                                  std::int64_t minimum,
                                                  std::int64_t maximum) const {
  if (!given(name)) return fallback;
  std::vector<std::int64_t> values;
  for (const std::string& item : split(text(name, ""), ',')) {
    std::int64_t parsed = 0;
    if (!parse_integer(item, &parsed))
      fail("--" + name + " expects comma-separated integers, got '" + item + "'");
    if (parsed < minimum || parsed > maximum)
      fail("--" + name + " values must be in [" + std::to_string(minimum) + ", " +
           std::to_string(maximum) + "], got " + item);
    values.push_back(parsed);
  }
  if (values.empty()) fail("--" + name + " needs at least one value");
  return values;
}

std::vector<std::string> Arguments::choice_list(const std::string& name,
                                                const std::vector<std::string>& fallback,
                                                const std::vector<std::string>& allowed) const {
  if (!given(name)) return fallback;
  std::vector<std::string> values;
  for (const std::string& item : split(text(name, ""), ',')) {
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end())
      fail("--" + name + " items must be among " + joined(allowed, ", ") + ", got '" + item + "'");
    values.push_back(item);
  }
  if (values.empty()) fail("--" + name + " needs at least one value");
  return values;
}

std::string Arguments::usage() const {
  std::string text = "usage: flashgen " + command_ + " " + synopsis_ + "\n\n" + description_ +
                     "\n\noptions:\n";
  for (const std::string& name : order_) {
    const Spec& s = specs_.at(name);
    std::string left = "  --" + name + (s.metavar.empty() ? "" : " " + s.metavar);
    constexpr std::size_t kHelpColumn = 26;
    if (left.size() + 2 > kHelpColumn)
      left += "\n" + std::string(kHelpColumn, ' ');
    else
      left += std::string(kHelpColumn - left.size(), ' ');
    text += left + s.help + "\n";
  }
  text += "  --help                  this text\n";
  return text;
}

}  // namespace flashgen::cli
