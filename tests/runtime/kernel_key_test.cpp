// Kernel cache keys and the cache directory (no NVRTC needed).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <set>

#include "cuda/runtime/compiler.hpp"
#include "cuda/runtime/embedded_headers.hpp"
#include "runtime_test_util.hpp"

namespace flashgen::cuda {
namespace {

const char* kNvrtc = "13.0";

CompileRequest base_request() {
  return test::request_for(test::kWriteIdsSource, "write_ids", "sm_90a");
}

TEST(KernelKey, SameRequestSameKey) {
  KernelKey a = make_kernel_key(base_request(), kNvrtc);
  KernelKey b = make_kernel_key(base_request(), kNvrtc);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_EQ(a.digest.size(), 64u);
}

TEST(KernelKey, EveryInputChangesTheDigest) {
  std::vector<KernelKey> keys;
  keys.push_back(make_kernel_key(base_request(), kNvrtc));
  CompileRequest r = base_request();
  r.source += "\n// one more line\n";
  keys.push_back(make_kernel_key(r, kNvrtc));
  r = base_request();
  r.options = {"--maxrregcount=128"};
  keys.push_back(make_kernel_key(r, kNvrtc));
  r = base_request();
  r.arch = "sm_80";
  keys.push_back(make_kernel_key(r, kNvrtc));
  r = base_request();
  r.name = "another name";
  keys.push_back(make_kernel_key(r, kNvrtc));
  r = base_request();
  r.entry = "other_entry";
  keys.push_back(make_kernel_key(r, kNvrtc));
  keys.push_back(make_kernel_key(base_request(), "12.8"));
  std::set<std::string> digests;
  for (const KernelKey& k : keys) digests.insert(k.digest);
  EXPECT_EQ(digests.size(), keys.size()) << "some input does not reach the key";
}

TEST(KernelKey, OptionOrderMatters) {
  CompileRequest a = base_request(), b = base_request();
  a.options = {"-DA=1", "-DB=2"};
  b.options = {"-DB=2", "-DA=1"};
  // NVRTC options can override each other, so order is part of the key.
  EXPECT_NE(make_kernel_key(a, kNvrtc).digest, make_kernel_key(b, kNvrtc).digest);
}

TEST(KernelKey, TextIsReadableAndComplete) {
  KernelKey k = make_kernel_key(base_request(), kNvrtc);
  for (std::string part : {std::string("name: test_write_ids_sm_90a"), std::string("entry: write_ids"),
                           std::string("arch: sm_90a"), std::string("nvrtc: 13.0"),
                           std::string("library: ") + FLASHGEN_VERSION,
                           std::string(embedded_device_headers_hash()),
                           std::string("option: --gpu-architecture=sm_90a")})
    EXPECT_NE(k.text.find(part), std::string::npos) << part << "\n" << k.text;
}

TEST(KernelKey, FixedOptionsComeFirstThenTheRequests) {
  CompileRequest r = base_request();
  r.options = {"--maxrregcount=64"};
  std::vector<std::string> o = nvrtc_options(r);
  ASSERT_GE(o.size(), 2u);
  EXPECT_EQ(o.front(), "--gpu-architecture=sm_90a");
  EXPECT_EQ(o.back(), "--maxrregcount=64");
  for (const std::string& option : o) EXPECT_NE(option, "--use_fast_math");
}

TEST(FileSafeName, ReplacesUnsafeCharactersAndClips) {
  EXPECT_EQ(file_safe_name("forward bf16 d=128/causal"), "forward_bf16_d_128_causal");
  EXPECT_EQ(file_safe_name(""), "kernel");
  EXPECT_LE(file_safe_name(std::string(1000, 'x')).size(), 200u);
}

using test::ScopedEnv;

TEST(CacheDir, EnvironmentOverrides) {
  ScopedEnv env("FLASHGEN_CACHE_DIR", "/tmp/flashgen-cache-test");
  EXPECT_EQ(cache_dir("sm_90a"), "/tmp/flashgen-cache-test");
}

TEST(CacheDir, DefaultIsUnderHomeByVersionAndArch) {
  ScopedEnv env("FLASHGEN_CACHE_DIR", nullptr);
  ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(cache_dir("sm_80"), std::string("/home/someone/.cache/flashgen/") + FLASHGEN_VERSION + "/sm_80");
}

}  // namespace
}  // namespace flashgen::cuda
