// The order in which libnvrtc is looked for: pip wheels beside the package,
// then a CUDA toolkit, then the loader's path; checked with stand-in
// libraries (fake_nvrtc.cc) that report different versions.
#include "cuda/runtime/nvrtc_search.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cuda/runtime/nvrtc_api.hpp"
#include "temp_dir.hpp"

namespace flashgen::cuda::nvrtc {
namespace {

namespace fs = std::filesystem;
using ::flashgen::testing::TempDir;

// A wheel install: site-packages/flashgen/_lib/lib/libflashgen.so.
struct Layout {
  TempDir root;
  fs::path site_packages = fs::path(root.path()) / "site-packages";
  fs::path own_directory = site_packages / "flashgen" / "_lib" / "lib";
  fs::path cuda12_wheel = site_packages / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.12";
  fs::path cuda13_wheel = site_packages / "nvidia" / "cu13" / "lib" / "libnvrtc.so.13";
  fs::path toolkit = fs::path(root.path()) / "cuda";

  Layout() { fs::create_directories(own_directory); }
  SearchRoots roots() const { return {own_directory.string(), toolkit.string(), ""}; }
};

void place(const char* built, const fs::path& where) {
  fs::create_directories(where.parent_path());
  fs::copy_file(built, where, fs::copy_options::overwrite_existing);
}

std::vector<std::string> origins(const std::vector<LibraryCandidate>& list) {
  std::vector<std::string> out;
  for (const LibraryCandidate& c : list)
    if (out.empty() || out.back() != c.origin) out.push_back(c.origin);
  return out;
}

TEST(NvrtcSearch, PipWheelsComeBeforeTheToolkitAndTheLoaderPath) {
  Layout layout;
  place(FAKE_NVRTC_12, layout.cuda12_wheel);
  place(FAKE_NVRTC_13, layout.cuda13_wheel);
  const std::vector<LibraryCandidate> list = candidates(layout.roots());
  ASSERT_GE(list.size(), 3u);
  // The CUDA 13 wheel before the CUDA 12 one, both found from three folders up.
  EXPECT_EQ(list[0].path, layout.cuda13_wheel.string());
  EXPECT_EQ(list[1].path, layout.cuda12_wheel.string());
  EXPECT_EQ(list[2].path, (layout.toolkit / "lib64" / "libnvrtc.so.13").string());
  EXPECT_EQ(origins(list), (std::vector<std::string>{"pip wheel", "CUDA toolkit", "loader path"}));
  EXPECT_EQ(list.back().path, "libnvrtc.so");  // a bare soname: LD_LIBRARY_PATH, ldconfig
}

TEST(NvrtcSearch, MissingWheelsAreLeftOutOfTheList) {
  Layout layout;
  const std::vector<LibraryCandidate> list = candidates(layout.roots());
  ASSERT_FALSE(list.empty());
  EXPECT_EQ(list.front().origin, "CUDA toolkit");
  EXPECT_EQ(list.front().path, (layout.toolkit / "lib64" / "libnvrtc.so.13").string());
}

TEST(NvrtcSearch, LoadsTheWheelWhenAToolkitIsThereToo) {
  Layout layout;
  place(FAKE_NVRTC_12, layout.cuda12_wheel);
  place(FAKE_NVRTC_13, layout.toolkit / "lib64" / "libnvrtc.so.13");
  const Status status = load_status(candidates(layout.roots()));
  ASSERT_TRUE(status.ok) << status.reason;
  EXPECT_EQ(status.library, layout.cuda12_wheel.string());
  EXPECT_EQ(status.origin, "pip wheel");
  EXPECT_EQ(status.major, 12);
  EXPECT_EQ(status.minor, 9);
}

TEST(NvrtcSearch, LoadsTheToolkitWithoutAWheel) {
  Layout layout;
  const fs::path toolkit_library = layout.toolkit / "lib64" / "libnvrtc.so.12";
  place(FAKE_NVRTC_13, toolkit_library);
  const Status status = load_status(candidates(layout.roots()));
  ASSERT_TRUE(status.ok) << status.reason;
  EXPECT_EQ(status.library, toolkit_library.string());
  EXPECT_EQ(status.origin, "CUDA toolkit");
  EXPECT_EQ(status.major, 13);
}

TEST(NvrtcSearch, ALibraryWithoutTheApiIsRefusedWithItsName) {
  Layout layout;
  // A shared library that loads but is no NVRTC: the search stops at the
  // first file that loads and says what it lacks.
  place(NOT_NVRTC, layout.cuda12_wheel);
  const Status status = load_status(candidates(layout.roots()));
  EXPECT_FALSE(status.ok);
  EXPECT_NE(status.reason.find(layout.cuda12_wheel.string()), std::string::npos) << status.reason;
  EXPECT_NE(status.reason.find("lacks nvrtcVersion"), std::string::npos) << status.reason;
}

TEST(NvrtcSearch, TheProcessFindsItsOwnFolder) {
  // flashgen_tests links the library statically: its folder is the executable's.
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  EXPECT_EQ(search_roots().own_directory, exe.parent_path().string());
}

}  // namespace
}  // namespace flashgen::cuda::nvrtc
