// compile_only through NVRTC (no GPU needed): targets, the resource report,
// errors and source dumps. Skips, saying why, where libnvrtc cannot be loaded.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "cuda/runtime/compiler.hpp"
#include "cuda/runtime/embedded_headers.hpp"
#include "flashgen/flashgen.hpp"
#include "runtime_test_util.hpp"

namespace flashgen::cuda {
namespace {

using test::request_for;

class CompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!test::nvrtc_ready(&reason)) GTEST_SKIP() << reason;
  }
};

// Register pressure beyond --maxrregcount: 64 live floats per thread.
const char* kPressureSource = R"(
extern "C" __global__ void pressure(const float* in, float* out) {
  float v[64];
  for (int k = 0; k < 64; ++k) v[k] = in[threadIdx.x + k * 32];
  float acc = 0;
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 64; ++k) acc += v[k] * v[(k + r) & 63];
  out[threadIdx.x] = acc;
}
)";

TEST_F(CompileTest, Sm80ReportsRegisters) {
  CompiledKernel k = compile_only(request_for(test::kWriteIdsSource, "write_ids", "sm_80"));
  EXPECT_EQ(k.function, nullptr);
  EXPECT_GT(k.resources.registers, 0) << k.log;
  EXPECT_EQ(k.resources.spill_store_bytes, 0) << k.log;
  EXPECT_NE(k.log.find("write_ids"), std::string::npos) << k.log;
}

TEST_F(CompileTest, Sm90aArchSpecificTargetCompiles) {
  CompiledKernel k = compile_only(request_for(test::kWriteIdsSource, "write_ids", "sm_90a"));
  EXPECT_GT(k.resources.registers, 0) << k.log;
  EXPECT_NE(k.log.find("sm_90a"), std::string::npos) << k.log;
}

// FLASHGEN_VERBOSE=1: a line per kernel compiled or read from the disk cache.
TEST_F(CompileTest, VerboseSaysWhatWasCompiledAndWhatWasLoaded) {
  test::TempDir dir;
  test::ScopedEnv cache("FLASHGEN_CACHE_DIR", dir.path().c_str());
  const CompileRequest request = request_for(test::kWriteIdsSource, "write_ids", "sm_80");
  {
    test::ScopedEnv quiet("FLASHGEN_VERBOSE", nullptr);
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(precompile(request));
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  }
  test::ScopedEnv verbose("FLASHGEN_VERBOSE", "1");
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(precompile(request));  // the cubin is on disk now
  const std::string loaded = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(loaded.find("flashgen: loaded test_write_ids_sm_80 for sm_80 in "), std::string::npos)
      << loaded;
  EXPECT_NE(loaded.find("cache " + dir.path()), std::string::npos) << loaded;
  std::filesystem::remove_all(dir.path());
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(precompile(request));
  const std::string compiled = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(compiled.find("flashgen: compiled test_write_ids_sm_80 for sm_80 in "),
            std::string::npos)
      << compiled;
}

TEST_F(CompileTest, CubinIsAnElfImage) {
  CubinArtifact a = compile_to_cubin(request_for(test::kWriteIdsSource, "write_ids", "sm_80"));
  ASSERT_GE(a.cubin.size(), 4u);
  EXPECT_EQ(a.cubin.substr(0, 4), std::string("\x7f" "ELF", 4));
}

TEST_F(CompileTest, ReportsStackFrameAndStaticShared) {
  CompiledKernel k =
      compile_only(request_for(test::kStackAndSharedSource, "stack_and_shared", "sm_80"));
  EXPECT_EQ(k.resources.stack_frame_bytes, 400) << k.log;   // int local[100]
  EXPECT_EQ(k.resources.static_shared_bytes, 256) << k.log;  // float tile[64]
}

TEST_F(CompileTest, ReportsSpillsUnderARegisterCap) {
  CompileRequest r = request_for(kPressureSource, "pressure", "sm_80");
  r.options = {"--maxrregcount=32"};
  CompiledKernel k = compile_only(r);
  EXPECT_LE(k.resources.registers, 32) << k.log;
  EXPECT_GT(k.resources.spill_store_bytes, 0) << k.log;
  EXPECT_GT(k.resources.spill_load_bytes, 0) << k.log;
}

TEST_F(CompileTest, CompileErrorCarriesTheLogAndSource) {
  CompileRequest r = request_for(
      "extern \"C\" __global__ void broken(int* out) { out[0] = undeclared_value; }\n", "broken",
      "sm_80");
  try {
    compile_only(r);
    FAIL() << "a source with an undeclared identifier compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::runtime);
    std::string what = e.what();
    EXPECT_NE(what.find("undeclared_value"), std::string::npos) << what;  // from the log
    EXPECT_NE(what.find("error"), std::string::npos) << what;
    EXPECT_NE(what.find("1| extern"), std::string::npos) << what;  // the numbered source
    EXPECT_NE(what.find(r.name), std::string::npos) << what;
  }
}

TEST_F(CompileTest, UnknownOptionIsARuntimeError) {
  CompileRequest r = request_for(test::kWriteIdsSource, "write_ids", "sm_80");
  r.options = {"--no-such-option-exists"};
  try {
    compile_only(r);
    FAIL() << "an unknown NVRTC option was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::runtime);
  }
}

TEST_F(CompileTest, MisnamedEntryIsRejected) {
  try {
    compile_only(request_for(test::kWriteIdsSource, "write_idz", "sm_80"));
    FAIL() << "an entry missing from the source was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("found: write_ids"), std::string::npos) << e.what();
  }
}

TEST_F(CompileTest, EmbeddedHeadersResolveByName) {
  const auto& headers = embedded_device_headers();
  if (headers.empty()) GTEST_SKIP() << "no device headers are embedded yet";
  std::string source;
  for (const EmbeddedHeader& h : headers)
    source += std::string("static_assert(__has_include(\"") + h.name + "\"), \"" + h.name + "\");\n";
  source += "static_assert(!__has_include(\"no_such_header.cuh\"), \"\");\n";
  source += test::kWriteIdsSource;
  EXPECT_NO_THROW(compile_only(request_for(source.c_str(), "write_ids", "sm_80")));
}

TEST_F(CompileTest, DumpSourceWritesSourceAndLog) {
  test::TempDir dir;
  ASSERT_EQ(::setenv("FLASHGEN_DUMP_SOURCE", dir.path().c_str(), 1), 0);
  CompileRequest r = request_for(test::kWriteIdsSource, "write_ids", "sm_80");
  r.name = "dump me/please";  // not file-safe on purpose
  CompiledKernel k = compile_only(r);
  ::unsetenv("FLASHGEN_DUMP_SOURCE");
  std::ifstream source(dir.path() + "/dump_me_please.cu");
  std::ifstream log(dir.path() + "/dump_me_please.log");
  ASSERT_TRUE(source.good());
  ASSERT_TRUE(log.good());
  std::string text(std::istreambuf_iterator<char>(source), {});
  std::string log_text(std::istreambuf_iterator<char>(log), {});
  EXPECT_EQ(text, r.source);
  EXPECT_EQ(log_text, k.log);
}

TEST_F(CompileTest, NvrtcVersionIsMajorDotMinor) {
  std::string v = nvrtc_version();
  ASSERT_NE(v.find('.'), std::string::npos) << v;
  EXPECT_GE(std::stoi(v), 11) << v;
}

// Needs no NVRTC: the request is checked first.
TEST(CompileRequestValidation, IncompleteRequestsNameTheField) {
  CompileRequest r = request_for(test::kWriteIdsSource, "write_ids", "sm_80");
  auto expect_invalid = [](CompileRequest bad, const char* field) {
    try {
      compile_only(bad);
      FAIL() << "accepted a request with a bad " << field;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  CompileRequest no_name = r;
  no_name.name.clear();
  expect_invalid(no_name, "name");
  CompileRequest no_source = r;
  no_source.source.clear();
  expect_invalid(no_source, "source");
  CompileRequest no_entry = r;
  no_entry.entry.clear();
  expect_invalid(no_entry, "entry");
  CompileRequest bad_arch = r;
  bad_arch.arch = "hopper";
  expect_invalid(bad_arch, "arch");
}

}  // namespace
}  // namespace flashgen::cuda
