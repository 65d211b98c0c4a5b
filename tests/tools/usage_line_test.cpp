// Every command's usage line names every option its help lists, so a reader
// of the first lines of `flashgen <command> --help` sees all there is.
#include <gtest/gtest.h>

#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"

namespace {

using namespace flashgen::cli::test;

// The options of the "options:" section: "  --name ..." at the start of a line.
std::vector<std::string> listed_options(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream lines(help.substr(help.find("\noptions:\n")));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  --", 0) != 0) continue;
    const std::string name = line.substr(2, line.find(' ', 2) - 2);
    if (name != "--help") names.push_back(name);
  }
  return names;
}

// The usage line and its continuations: everything before the first blank line.
std::string usage_lines(const std::string& help) { return help.substr(0, help.find("\n\n")); }

// True when `name` appears in `text` as a whole option, not as the start of a
// longer one (--seq in "--seq-kv").
bool names_option(const std::string& text, const std::string& name) {
  for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    const std::size_t end = at + name.size();
    if (end == text.size() ||
        !(std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-'))
      return true;
  }
  return false;
}

class UsageLine : public CommandTest {};

TEST_F(UsageLine, EveryCommandNamesAllItsOptions) {
  const Outcome list = run_cli("--help");
  ASSERT_EQ(list.exit_code, 0) << list.output;
  std::vector<std::string> commands;
  std::istringstream lines(list.output.substr(list.output.find("commands:\n")));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ')
      commands.push_back(line.substr(2, line.find(' ', 2) - 2));
  ASSERT_GE(commands.size(), 6u) << list.output;
  for (const std::string& command : commands) {
    const Outcome help = run_cli(command + " --help");
    ASSERT_EQ(help.exit_code, 0) << command << ": " << help.output;
    const std::vector<std::string> options = listed_options(help.output);
    EXPECT_FALSE(options.empty()) << command << ": " << help.output;
    const std::string usage = usage_lines(help.output);
    for (const std::string& option : options)
      EXPECT_TRUE(names_option(usage, option))
          << "flashgen " << command << ": the usage line leaves out " << option << "\n"
          << usage;
  }
}

}  // namespace
