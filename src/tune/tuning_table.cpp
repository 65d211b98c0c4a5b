#include "tune/tuning_table.hpp"

#include <cstdlib>
#include <sstream>
#include <string>

namespace flashgen {
namespace {

// FLASHGEN_TUNING="forward: rows=128 cols=64 head=0 warps=8 cache=none; backward_query: ..."
// forces the tuning of a kernel kind for every problem: for experiments and
// for measuring tuning candidates from the command line.
std::optional<TuningParams> environment_override(KernelKind kind) {
  const char* text = std::getenv("FLASHGEN_TUNING");
  if (text == nullptr) return std::nullopt;
  std::stringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    const auto colon = entry.find(':');
    if (colon == std::string::npos)
      throw Error(ErrorCode::invalid_argument,
                  "FLASHGEN_TUNING: expected 'kind: tuning' entries separated by ';', got '" +
                      entry + "'");
    std::string name = entry.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name == to_string(kind)) return parse_tuning(entry.substr(colon + 1));
  }
  return std::nullopt;
}

}  // namespace

std::optional<TuningParams> lookup_tuning(const KernelSpec& spec, const Problem&) {
  return environment_override(spec.kind);
}

}  // namespace flashgen
