// `flashgen <command> [options]`: dispatches to the commands of commands.hpp
// and turns their exceptions into messages and exit codes.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "commands.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cli {
namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& words);
};

#define FLASHGEN_COMMAND_ROW(name, summary) {#name, summary, &name##_command},
const Command kCommands[] = {FLASHGEN_COMMANDS(FLASHGEN_COMMAND_ROW)};
#undef FLASHGEN_COMMAND_ROW

void print_usage(std::FILE* stream) {
  std::fprintf(stream, "usage: flashgen <command> [options]    (flashgen %s)\n\ncommands:\n",
               version());
  for (const Command& command : kCommands)
    std::fprintf(stream, "  %-10s %s\n", command.name, command.summary);
  std::fprintf(stream, "\n'flashgen <command> --help' describes a command's options.\n");
}

int dispatch(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return kExitUsage;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(stdout);
    return kExitOk;
  }
  if (name == "--version") {
    std::printf("flashgen %s\n", version());
    return kExitOk;
  }
  const std::vector<std::string> words(argv + 2, argv + argc);
  for (const Command& command : kCommands)
    if (name == command.name) return command.run(words);
  std::fprintf(stderr, "flashgen: unknown command '%s'\n\n", name.c_str());
  print_usage(stderr);
  return kExitUsage;
}

}  // namespace
}  // namespace flashgen::cli

int main(int argc, char** argv) {
  using namespace flashgen::cli;
  try {
    return dispatch(argc, argv);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return kExitUsage;
  } catch (const flashgen::Error& error) {
    std::fprintf(stderr, "flashgen: %s\n", error.what());
    return error.code() == flashgen::ErrorCode::runtime ? kExitCheckFailed : kExitRefused;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "flashgen: %s\n", error.what());
    return kExitCheckFailed;
  }
}
