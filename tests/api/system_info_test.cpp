// system_info() never throws, and says what it can about this machine.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cpu/isa_dispatch.hpp"
#include "cuda/cuda_backend.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen {
namespace {

TEST(SystemInfo, DescribesThisMachine) {
  const SystemInfo info = system_info();
  EXPECT_EQ(info.version, version());
  EXPECT_GE(info.cpu_threads, 1);
  EXPECT_FALSE(info.cache_dir.empty());
  EXPECT_FALSE(info.cuda_status.empty());
  EXPECT_EQ(info.cuda_available, cuda::availability().ok);
  EXPECT_EQ(static_cast<int>(info.devices.size()), info.device_count);
  if (!info.cuda_available) {
    EXPECT_EQ(info.cuda_status, cuda::availability().reason);
  }
}

TEST(SystemInfo, NamesTheCpuKernelsItRuns) {
  const char* saved = std::getenv("FLASHGEN_CPU_ISA");
  const std::string previous = saved ? saved : "";
  unsetenv("FLASHGEN_CPU_ISA");
  const std::string best = system_info().cpu_isa;
  EXPECT_NE(cpu::runnable_tile_kernels_named(best), nullptr) << best;
  setenv("FLASHGEN_CPU_ISA", "generic", 1);
  EXPECT_EQ(system_info().cpu_isa, "generic");
  setenv("FLASHGEN_CPU_ISA", "no-such-isa", 1);  // falls back to the best
  EXPECT_EQ(system_info().cpu_isa, best);
  if (saved)
    setenv("FLASHGEN_CPU_ISA", previous.c_str(), 1);
  else
    unsetenv("FLASHGEN_CPU_ISA");
}

TEST(SystemInfo, CacheDirectoryFollowsTheEnvironment) {
  if (cuda::availability().ok) GTEST_SKIP() << "with a GPU the runtime names the directory";
  const char* saved = std::getenv("FLASHGEN_CACHE_DIR");
  const std::string previous = saved ? saved : "";
  setenv("FLASHGEN_CACHE_DIR", "/tmp/flashgen-cache-test", 1);
  EXPECT_EQ(system_info().cache_dir, "/tmp/flashgen-cache-test");
  unsetenv("FLASHGEN_CACHE_DIR");
  const std::string fallback = system_info().cache_dir;
  EXPECT_NE(fallback.find(std::string(".cache/flashgen/") + version()), std::string::npos)
      << fallback;
  if (saved) setenv("FLASHGEN_CACHE_DIR", previous.c_str(), 1);
}

}  // namespace
}  // namespace flashgen
