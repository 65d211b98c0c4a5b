// The on-disk cubin cache: hits, rebuilds of damaged files, unusable
// directories, and concurrent builders in separate processes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "cuda/runtime/cubin_cache.hpp"
#include "runtime_test_util.hpp"

namespace flashgen::cuda {
namespace {

using test::fake_artifact;
using test::TempDir;

void expect_same(const CubinArtifact& a, const CubinArtifact& b) {
  EXPECT_EQ(a.cubin, b.cubin);
  EXPECT_EQ(a.log, b.log);
  EXPECT_EQ(a.resources.registers, b.resources.registers);
  EXPECT_EQ(a.resources.spill_store_bytes, b.resources.spill_store_bytes);
  EXPECT_EQ(a.resources.spill_load_bytes, b.resources.spill_load_bytes);
  EXPECT_EQ(a.resources.stack_frame_bytes, b.resources.stack_frame_bytes);
  EXPECT_EQ(a.resources.static_shared_bytes, b.resources.static_shared_bytes);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Builds through `cache`, counting builds.
struct CountingBuilder {
  CubinArtifact artifact;
  int builds = 0;
  CubinArtifact operator()() {
    ++builds;
    return artifact;
  }
};

class CubinCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "mkdtemp failed"; }
  TempDir dir_;
  KernelKey key_ = make_key("flashgen kernel\nname: cache_test\n");
  CountingBuilder builder_{fake_artifact("body-one")};

  CubinArtifact fetch(const CubinCache& cache, bool* from_disk = nullptr) {
    return cache.load_or_build(key_, std::ref(builder_), from_disk);
  }
};

TEST_F(CubinCacheTest, EncodeDecodeRoundTrip) {
  CubinArtifact a = fake_artifact("round-trip");
  std::optional<CubinArtifact> b = decode_cache_file(encode_cache_file(key_, a), key_);
  ASSERT_TRUE(b.has_value());
  expect_same(a, *b);
}

TEST_F(CubinCacheTest, SecondCallIsAHitWithoutBuilding) {
  CubinCache cache(dir_.path());
  bool from_disk = true;
  CubinArtifact first = fetch(cache, &from_disk);
  EXPECT_FALSE(from_disk);
  EXPECT_EQ(builder_.builds, 1);
  EXPECT_TRUE(std::filesystem::exists(cache.path_for(key_)));
  CubinArtifact second = fetch(cache, &from_disk);
  EXPECT_TRUE(from_disk);
  EXPECT_EQ(builder_.builds, 1) << "a valid file must not be rebuilt";
  expect_same(first, second);
  expect_same(builder_.artifact, second);
}

TEST_F(CubinCacheTest, FileNameIsTheDigest) {
  CubinCache cache(dir_.path());
  EXPECT_EQ(std::filesystem::path(cache.path_for(key_)).filename().string(), key_.digest + ".cubin");
  EXPECT_EQ(key_.digest.size(), 64u);
}

TEST_F(CubinCacheTest, LeavesNoTemporaryFiles) {
  CubinCache cache(dir_.path());
  fetch(cache);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    ++files;
    EXPECT_EQ(e.path().extension(), ".cubin") << e.path();
  }
  EXPECT_EQ(files, 1);
}

// Each damage is detected, the file rebuilt, rewritten valid, then hit again.
void expect_rebuilt_after(const CubinCache& cache, const KernelKey& key,
                          CountingBuilder* builder, const std::function<void(const std::string&)>& damage) {
  cache.load_or_build(key, std::ref(*builder));
  ASSERT_EQ(builder->builds, 1);
  damage(cache.path_for(key));
  EXPECT_FALSE(cache.load(key).has_value()) << "damaged file accepted";
  CubinArtifact rebuilt = cache.load_or_build(key, std::ref(*builder));
  EXPECT_EQ(builder->builds, 2) << "damaged file not rebuilt";
  expect_same(builder->artifact, rebuilt);
  ASSERT_TRUE(cache.load(key).has_value()) << "rebuilt file not rewritten";
  cache.load_or_build(key, std::ref(*builder));
  EXPECT_EQ(builder->builds, 2);
}

TEST_F(CubinCacheTest, TruncatedFileIsRebuilt) {
  CubinCache cache(dir_.path());
  expect_rebuilt_after(cache, key_, &builder_, [](const std::string& path) {
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - 7);
  });
}

TEST_F(CubinCacheTest, EmptyFileIsRebuilt) {
  CubinCache cache(dir_.path());
  expect_rebuilt_after(cache, key_, &builder_,
                       [](const std::string& path) { std::filesystem::resize_file(path, 0); });
}

TEST_F(CubinCacheTest, GarbageFileIsRebuilt) {
  CubinCache cache(dir_.path());
  expect_rebuilt_after(cache, key_, &builder_, [](const std::string& path) {
    write_bytes(path, std::string(5000, '\xa5'));
  });
}

TEST_F(CubinCacheTest, FlippedByteInTheCubinIsRebuilt) {
  CubinCache cache(dir_.path());
  expect_rebuilt_after(cache, key_, &builder_, [](const std::string& path) {
    std::string bytes = read_bytes(path);
    bytes[bytes.size() - 40] ^= 0x01;  // inside the cubin, before the checksum
    write_bytes(path, bytes);
  });
}

TEST_F(CubinCacheTest, FileOfAnotherKeyIsRebuilt) {
  CubinCache cache(dir_.path());
  const KernelKey other = make_key("flashgen kernel\nname: another\n");
  expect_rebuilt_after(cache, key_, &builder_, [&](const std::string& path) {
    // A well-formed file whose key text differs (a stale or colliding file).
    write_bytes(path, encode_cache_file(other, fake_artifact("other-body")));
  });
}

TEST_F(CubinCacheTest, NonElfCubinIsRebuilt) {
  CubinCache cache(dir_.path());
  expect_rebuilt_after(cache, key_, &builder_, [&](const std::string& path) {
    CubinArtifact not_elf = fake_artifact("x");
    not_elf.cubin = "PTX?" + not_elf.cubin.substr(4);
    write_bytes(path, encode_cache_file(key_, not_elf));
  });
}

TEST_F(CubinCacheTest, UnusableDirectoryStillBuilds) {
  // A directory below a regular file can never be created, even by root.
  const std::string file = dir_.path() + "/plain-file";
  write_bytes(file, "x");
  CubinCache cache(file + "/cache");
  CubinArtifact a = fetch(cache);
  CubinArtifact b = fetch(cache);
  expect_same(builder_.artifact, a);
  expect_same(builder_.artifact, b);
  EXPECT_EQ(builder_.builds, 2);
  EXPECT_FALSE(cache.store(key_, builder_.artifact));
}

TEST_F(CubinCacheTest, EmptyDirectoryDisablesTheDiskCache) {
  CubinCache cache("");
  fetch(cache);
  fetch(cache);
  EXPECT_EQ(builder_.builds, 2);
  EXPECT_EQ(cache.path_for(key_), "");
}

TEST_F(CubinCacheTest, BuildFailurePropagatesAndWritesNothing) {
  CubinCache cache(dir_.path());
  EXPECT_THROW(cache.load_or_build(key_, []() -> CubinArtifact { throw std::runtime_error("boom"); }),
               std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(cache.path_for(key_)));
}

TEST_F(CubinCacheTest, CreatesMissingDirectories) {
  CubinCache cache(dir_.path() + "/a/b/c");
  fetch(cache);
  fetch(cache);
  EXPECT_EQ(builder_.builds, 1);
}

// Several processes build the same keys at once; each must get the artifact
// it expects and every final file must be valid.
TEST_F(CubinCacheTest, ConcurrentProcessesBuildingTheSameKeys) {
  constexpr int kProcesses = 4;
  constexpr int kKeys = 12;
  CubinCache cache(dir_.path());
  std::vector<KernelKey> keys;
  std::vector<CubinArtifact> expected;
  for (int k = 0; k < kKeys; ++k) {
    keys.push_back(make_key("flashgen kernel\nname: concurrent_" + std::to_string(k) + "\n"));
    // Large enough that a write is not a single page.
    expected.push_back(fake_artifact(std::string(200000 + k, char('a' + k))));
  }
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(start[1]);
      char go;
      if (::read(start[0], &go, 1) != 1) ::_exit(3);  // all start together
      for (int k = 0; k < kKeys; ++k) {
        CubinArtifact got = cache.load_or_build(keys[k], [&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));  // widen the race
          return expected[k];
        });
        if (got.cubin != expected[k].cubin || got.log != expected[k].log) ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  ::close(start[0]);
  const std::string go(kProcesses, 'g');
  ASSERT_EQ(::write(start[1], go.data(), go.size()), ssize_t(go.size()));
  ::close(start[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "a child got a wrong or partial artifact";
  }
  for (int k = 0; k < kKeys; ++k) {
    std::optional<CubinArtifact> final_file = cache.load(keys[k]);
    ASSERT_TRUE(final_file.has_value()) << "key " << k;
    expect_same(expected[k], *final_file);
  }
}

}  // namespace
}  // namespace flashgen::cuda
