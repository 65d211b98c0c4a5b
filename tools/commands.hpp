// The command table of the `flashgen` tool. Adding a command is one file and
// one line: tools/NAME.cpp defines
//     int NAME_command(const std::vector<std::string>& words);
// (words: what follows the command name) and the line
//     COMMAND(NAME, "one-line summary")
// below makes main() list and dispatch it.
#pragma once

#include <string>
#include <vector>

#define FLASHGEN_COMMANDS(COMMAND)                                                       \
  COMMAND(info, "backends, GPU and compute capability, NVRTC, cache directory, threads") \
  COMMAND(run, "forward + backward on one problem, checked against the fp64 reference")  \
  COMMAND(bench, "time forward and backward over head dimensions (table or --json)")  \
  COMMAND(tune, "measure tunings per head dimension on this GPU and write a tuning table") \
  COMMAND(precompile, "compile the kernels of head dimensions into the disk cache, no GPU needed") \
  COMMAND(source, "print the generated kernel source of one spec, no GPU needed")

namespace flashgen::cli {

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;  // results outside the tolerance, or a failed run
inline constexpr int kExitUsage = 2;        // bad command line
inline constexpr int kExitRefused = 3;      // flashgen::Error: invalid or unsupported problem

#define FLASHGEN_DECLARE_COMMAND(name, summary) \
  int name##_command(const std::vector<std::string>& words);
FLASHGEN_COMMANDS(FLASHGEN_DECLARE_COMMAND)
#undef FLASHGEN_DECLARE_COMMAND

}  // namespace flashgen::cli
