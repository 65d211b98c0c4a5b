// The shipped tuning tables (data/tuning/*.json) embedded at build time by
// cmake/embed_tuning_tables.cmake, so an installed library needs no source
// tree. Built without them (FLASHGEN_EMBEDDED_TUNING_TABLES undefined), the
// library ships no table and runs the heuristic defaults.
#pragma once

#include <vector>

namespace flashgen {

struct EmbeddedTuningTable {
  const char* name;  // file name, "sm90.json"
  const char* text;  // its JSON
};
const std::vector<EmbeddedTuningTable>& embedded_tuning_tables();

}  // namespace flashgen
