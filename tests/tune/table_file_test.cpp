// Tuning tables as files: every malformed field is refused with a message
// naming the file, the row and the field; valid tables survive a write/read
// round trip; merges replace rows of the same key; the shipped table parses.
#include "tune/table_file.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "tune/tuning_table.hpp"
#include "tune_test_util.hpp"

namespace flashgen {
namespace {

using nlohmann::json;
using tune_test::table_text;
using tune_test::valid_row;

// The message of the Error(invalid_argument) parsing throws, or "" when it parses.
std::string parse_error(const std::string& text, const std::string& arch = "sm90") {
  try {
    parse_tuning_table(text, "test.json", arch);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

struct BadField {
  const char* name;
  std::function<void(json&)> mutate;  // breaks one field of a valid row
  const char* field;                  // named as "test.json: rows[1].<field>: "
  const char* rule;                   // part of the message after it
};

std::vector<BadField> bad_fields() {
  return {
      {"kind_missing", [](json& r) { r.erase("kind"); }, "kind", "missing"},
      {"kind_untuned", [](json& r) { r["kind"] = "backward_prepare"; }, "kind",
       "must be one of forward, backward_query"},
      {"dtype_f32", [](json& r) { r["dtype"] = "f32"; }, "dtype", "must be \"bf16\" or \"f16\""},
      {"dtype_number", [](json& r) { r["dtype"] = 16; }, "dtype", "must be a string"},
      {"dim_qk_min_zero", [](json& r) { r["dim_qk_min"] = 0; }, "dim_qk_min", "must be in [1, "},
      {"dim_qk_max_below_min", [](json& r) { r["dim_qk_max"] = 32; }, "dim_qk_max",
       "must be in [128, "},
      {"dim_v_min_string", [](json& r) { r["dim_v_min"] = "64"; }, "dim_v_min",
       "must be an integer"},
      {"dim_v_max_fraction", [](json& r) { r["dim_v_max"] = 127.5; }, "dim_v_max",
       "must be an integer"},
      {"causal_number", [](json& r) { r["causal"] = 1; }, "causal", "must be true or false"},
      {"seq_min_zero", [](json& r) { r["seq_min"] = 0; }, "seq_min", "must be in [1, "},
      {"seq_max_below_min",
       [](json& r) {
         r["seq_min"] = 4096;
         r["seq_max"] = 1024;
       },
       "seq_max", "must be 0 (no upper bound) or >= seq_min (4096)"},
      {"tuning_rows_not_multiple",
       [](json& r) { r["tuning"] = "rows=48 cols=64 head=0 warps=4 cache=none"; }, "tuning",
       "rows must be a positive multiple of 16 * warps"},
      {"tuning_cols_not_multiple",
       [](json& r) { r["tuning"] = "rows=64 cols=40 head=0 warps=4 cache=none"; }, "tuning",
       "cols must be a positive multiple of 16"},
      {"tuning_head_not_multiple",
       [](json& r) { r["tuning"] = "rows=64 cols=64 head=40 warps=4 cache=none"; }, "tuning",
       "head must be 0 or a multiple of 16"},
      {"tuning_unknown_key", [](json& r) { r["tuning"] = "rows=64 depth=2"; }, "tuning",
       "unknown key 'depth'"},
      {"tuning_forward_caches_k",
       [](json& r) { r["tuning"] = "rows=64 cols=64 head=0 warps=4 cache=K"; }, "tuning",
       "the mma.sync forward caches only Q"},
      {"tuning_backward_caches_q",
       [](json& r) {
         r["kind"] = "backward_query";
         r["tuning"] = "rows=64 cols=64 head=0 warps=4 cache=Q";
       },
       "tuning", "this kernel caches no operand"},
      {"tuning_key_value_caches_k_without_split",
       [](json& r) {
         r["kind"] = "backward_key_value";
         r["tuning"] = "rows=64 cols=64 head=0 warps=4 cache=K";
       },
       "tuning", "this kernel caches no operand"},
      {"tflops_negative", [](json& r) { r["tflops"] = -1; }, "tflops", "must be >= 0"},
      {"tflops_text", [](json& r) { r["tflops"] = "fast"; }, "tflops", "must be a number"},
      {"default_tflops_text", [](json& r) { r["default_tflops"] = "slow"; }, "default_tflops",
       "must be a number"},
      {"date_empty", [](json& r) { r["date"] = ""; }, "date", "must not be empty"},
      {"driver_missing", [](json& r) { r.erase("driver"); }, "driver", "missing"},
      {"gpu_number", [](json& r) { r["gpu"] = 5; }, "gpu", "must be a string"},
      {"unknown_field", [](json& r) { r["warps"] = 4; }, "warps", "unknown field"},
      {"vec_not_a_class", [](json& r) { r["vec"] = 3; }, "vec", "must be 1, 2, 4 or 8"},
      {"vec_too_large", [](json& r) { r["vec"] = 16; }, "vec", "must be in [1, 8]"},
  };
}

class TableBadField : public ::testing::TestWithParam<BadField> {};

TEST_P(TableBadField, NamesFileRowAndField) {
  json second = valid_row();
  second["dim_qk_min"] = second["dim_qk_max"] = second["dim_v_min"] = second["dim_v_max"] = 128;
  GetParam().mutate(second);
  const std::string message = parse_error(table_text(json::array({valid_row(), second})));
  const std::string where = std::string("test.json: rows[1].") + GetParam().field + ": ";
  ASSERT_EQ(message.find(where), 0u) << message;
  EXPECT_NE(message.find(GetParam().rule, where.size()), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Fields, TableBadField, ::testing::ValuesIn(bad_fields()),
                         [](const ::testing::TestParamInfo<BadField>& info) {
                           return std::string(info.param.name);
                         });

TEST(TableFile, ValidRowParses) {
  json row = valid_row();
  row["default_tflops"] = 280.0;
  row["note"] = "hand-written";
  const TuningTable table = parse_tuning_table(table_text(json::array({row})), "test.json", "sm90");
  ASSERT_EQ(table.rows.size(), 1u);
  const TuningRow& r = table.rows[0];
  EXPECT_EQ(r.kind, KernelKind::forward);
  EXPECT_EQ(r.dtype, DType::bf16);
  EXPECT_EQ(r.dim_qk_min, 64);
  EXPECT_EQ(r.seq_max, 0);
  EXPECT_EQ(r.tuning, (TuningParams{128, 64, 0, 4, kCacheQ}));
  EXPECT_DOUBLE_EQ(r.tflops, 300.5);
  EXPECT_DOUBLE_EQ(r.default_tflops, 280.0);
  EXPECT_EQ(r.gpu, "NVIDIA H200");
  EXPECT_EQ(r.note, "hand-written");
}

TEST(TableFile, DuplicateKeyNamesBothRows) {
  const std::string message = parse_error(table_text(json::array({valid_row(), valid_row()})));
  EXPECT_NE(message.find("test.json: rows[1]: same kind, dtype, dims, causal and sequence bucket "
                         "as rows[0]"),
            std::string::npos)
      << message;
}

TEST(TableFile, HeaderErrors) {
  EXPECT_NE(parse_error("{ not json").find("test.json: not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error("[]").find("test.json: (top level): must be an object"), std::string::npos);
  EXPECT_NE(parse_error(R"({"format": 2, "arch": "sm90", "rows": []})")
                .find("test.json: format: must be 1"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"arch": "sm90", "rows": []})")
                .find("test.json: format: must be 1, got nothing"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"format": 1, "rows": []})").find("test.json: arch: must be a string"),
            std::string::npos);
  EXPECT_NE(parse_error(table_text(json::array(), "sm80"))
                .find("test.json: arch: the table is for \"sm80\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"format": 1, "arch": "sm90", "rows": {}})")
                .find("test.json: rows: must be an array"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"format": 1, "arch": "sm90", "rows": [], "extra": 1})")
                .find("test.json: extra: unknown field"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"format": 1, "arch": "sm90", "rows": [7]})")
                .find("test.json: rows[0]: must be an object"),
            std::string::npos);
}

TEST(TableFile, MissingFileIsAnError) {
  try {
    load_tuning_table("/nonexistent/flashgen/sm90.json", "sm90");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/flashgen/sm90.json: cannot be read"),
              std::string::npos);
  }
}

std::vector<TuningRow> sample_rows() {
  TuningRow a;
  a.kind = KernelKind::backward_key_value;
  a.dtype = DType::f16;
  a.dim_qk_min = a.dim_v_min = 100;
  a.dim_qk_max = a.dim_v_max = 128;
  a.causal = true;
  a.seq_min = 4097;
  a.seq_max = 8192;
  a.tuning = {64, 32, 0, 4, 0};
  a.tflops = 201.25;
  a.default_tflops = 190;
  a.date = "2026-12-03";
  a.driver = "13.0";
  a.gpu = "NVIDIA H200";
  TuningRow b = a;
  b.kind = KernelKind::forward;
  b.dtype = DType::bf16;
  b.causal = false;
  b.tuning = {128, 128, 0, 8, kCacheQ};
  b.note = "lopsided";
  b.vec = 4;
  TuningRow c = b;
  c.dim_qk_min = c.dim_qk_max = c.dim_v_min = c.dim_v_max = 512;
  c.tuning = {64, 32, 256, 4, 0};
  return {a, b, c};
}

TEST(TableFile, RoundTripKeepsEveryFieldInCanonicalOrder) {
  const TuningTable table{"sm90", sample_rows()};
  const std::string text = tuning_table_json(table);
  const TuningTable back = parse_tuning_table(text, "round trip", "sm90");
  ASSERT_EQ(back.rows.size(), 3u);
  // Canonical order: forward before backward_key_value; D = 100..128 before 512.
  EXPECT_EQ(back.rows[0].kind, KernelKind::forward);
  EXPECT_EQ(back.rows[0].dim_qk_min, 100);
  EXPECT_EQ(back.rows[1].dim_qk_min, 512);
  EXPECT_EQ(back.rows[2].kind, KernelKind::backward_key_value);
  const TuningRow a = sample_rows()[0];
  const TuningRow& r = back.rows[2];
  EXPECT_TRUE(r.same_key(a));
  EXPECT_EQ(r.tuning, a.tuning);
  EXPECT_NEAR(r.tflops, a.tflops, 0.051);  // written with one decimal
  EXPECT_EQ(r.default_tflops, a.default_tflops);
  EXPECT_EQ(r.date, a.date);
  EXPECT_EQ(r.driver, a.driver);
  EXPECT_EQ(r.gpu, a.gpu);
  EXPECT_EQ(back.rows[0].note, "lopsided");
  EXPECT_EQ(back.rows[0].vec, 4);
  EXPECT_EQ(r.vec, 0) << "not recorded, not written";

  // One row per line, columns aligned: "tuning" starts at the same column.
  std::istringstream lines(text);
  std::string line;
  std::vector<std::size_t> columns;
  while (std::getline(lines, line))
    if (line.find("\"kind\"") != std::string::npos) columns.push_back(line.find("\"tuning\""));
  ASSERT_EQ(columns.size(), 3u);
  EXPECT_EQ(columns[0], columns[1]);
  EXPECT_EQ(columns[1], columns[2]);
}

TEST(TableFile, EmptyTableRoundTrips) {
  const std::string text = tuning_table_json(TuningTable{"sm80", {}});
  EXPECT_TRUE(parse_tuning_table(text, "empty", "sm80").rows.empty());
}

TEST(TableFile, WriteCreatesDirectoriesAndReadsBack) {
  tune_test::TempDir dir;
  const std::string path = dir.path() + "/nested/tuning/sm90.json";
  write_tuning_table(path, TuningTable{"sm90", sample_rows()});
  EXPECT_EQ(load_tuning_table(path, "sm90").rows.size(), 3u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));
}

TEST(TableFile, MergeReplacesSameKeyAndAppendsOthers) {
  TuningTable table{"sm90", sample_rows()};
  TuningRow replacement = sample_rows()[0];
  replacement.tuning = {128, 64, 0, 8, 0};
  TuningRow added = sample_rows()[0];
  added.seq_min = 1;
  added.seq_max = 4096;
  merge_rows(table, {replacement, added});
  ASSERT_EQ(table.rows.size(), 4u);
  int replaced = 0, appended = 0;
  for (const TuningRow& r : table.rows) {
    if (r.same_key(replacement)) {
      EXPECT_EQ(r.tuning, replacement.tuning);
      ++replaced;
    }
    if (r.same_key(added)) ++appended;
  }
  EXPECT_EQ(replaced, 1);
  EXPECT_EQ(appended, 1);
}

TEST(TableFile, TableNameOfArch) {
  EXPECT_EQ(table_name_of_arch("sm_90a"), "sm90");
  EXPECT_EQ(table_name_of_arch("sm_90"), "sm90");
  EXPECT_EQ(table_name_of_arch("sm_80"), "sm80");
  EXPECT_EQ(table_name_of_arch("sm_100a"), "sm100");
  EXPECT_THROW(table_name_of_arch("gfx90a"), Error);
  EXPECT_THROW(table_name_of_arch("sm_"), Error);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ShippedTable, SourceFileIsValid) {
  const std::string path = tune_test::source_tuning_dir() + "/sm90.json";
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  EXPECT_NO_THROW(load_tuning_table(path, "sm90"));
}

TEST(ShippedTable, EmbeddedCopyMatchesTheSource) {
  const std::optional<std::string> embedded = shipped_tuning_table_text("sm90");
  if (!embedded) GTEST_SKIP() << "library built without embedded tuning tables";
  EXPECT_EQ(*embedded, read_text(tune_test::source_tuning_dir() + "/sm90.json"));
}

}  // namespace
}  // namespace flashgen
