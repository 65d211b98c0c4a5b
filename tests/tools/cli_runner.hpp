// Runs the built flashgen tool (FLASHGEN_CLI, set by tests/CMakeLists.txt) as
// a user runs it, for the tests of its output, messages and exit codes.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace flashgen::cli::test {

#ifdef FLASHGEN_CLI
inline constexpr const char* kCli = FLASHGEN_CLI;
#else
inline constexpr const char* kCli = nullptr;  // FLASHGEN_BUILD_TOOLS=OFF
#endif

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `arguments` is shell text: quote what needs it.
inline Outcome run_cli(const std::string& arguments) {
  Outcome outcome;
  const std::string command = std::string("'") + kCli + "' " + arguments + " 2>&1";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return outcome;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    outcome.output.append(buffer, n);
  const int status = pclose(pipe);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The fixture of a command's tests: each is skipped, visibly, where the tool
// is not built.
class CommandTest : public testing::Test {
 protected:
  void SetUp() override {
    if (kCli == nullptr) GTEST_SKIP() << "the flashgen tool is not built";
  }
};

}  // namespace flashgen::cli::test
