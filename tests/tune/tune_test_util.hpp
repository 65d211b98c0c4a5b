// Helpers of the tuning tests: a valid table row as JSON text to break one
// field at a time, environment variables set for a scope, scratch directories.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "scoped_env.hpp"
#include "temp_dir.hpp"

namespace flashgen::tune_test {

// A valid forward row for bf16 D = 64, non-causal, every sequence length.
inline nlohmann::json valid_row() {
  return nlohmann::json{{"kind", "forward"}, {"dtype", "bf16"},
                        {"dim_qk_min", 64},  {"dim_qk_max", 64},
                        {"dim_v_min", 64},   {"dim_v_max", 64},
                        {"causal", false},   {"seq_min", 1},
                        {"seq_max", 0},      {"tuning", "rows=128 cols=64 head=0 warps=4 cache=Q"},
                        {"tflops", 300.5},   {"date", "2026-12-03"},
                        {"driver", "13.0"},  {"gpu", "NVIDIA H200"}};
}

inline std::string table_text(const nlohmann::json& rows, const std::string& arch = "sm90") {
  return nlohmann::json{{"format", 1}, {"arch", arch}, {"rows", rows}}.dump(2);
}

using ::flashgen::testing::ScopedEnv;

using ::flashgen::testing::TempDir;

inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// data/tuning/ of the source tree (tests run from the build tree).
inline std::string source_tuning_dir() {
  return (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "data" /
          "tuning")
      .string();
}

}  // namespace flashgen::tune_test
