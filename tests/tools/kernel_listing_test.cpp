// What `flashgen source` prints for a spec: the comment line, the generated
// source and the device headers it includes, in translation-unit order.
#include <gtest/gtest.h>

#include <algorithm>

#include "codegen/generate.hpp"
#include "flashgen/flashgen.hpp"
#include "kernel_listing.hpp"

namespace flashgen::cli {
namespace {

std::size_t position(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) - names.begin();
}

TEST(KernelListing, KindNamesRoundTrip) {
  const std::vector<std::string> names = kernel_kind_names();
  ASSERT_EQ(names.size(), 9u);
  for (const std::string& name : names) EXPECT_EQ(to_string(kernel_kind_named(name)), name);
  EXPECT_THROW(kernel_kind_named("backward"), Error);
}

TEST(KernelListing, PackedVecDividesBothDims) {
  EXPECT_EQ(packed_vec(128, 128), 8);
  EXPECT_EQ(packed_vec(128, 36), 4);
  EXPECT_EQ(packed_vec(6, 64), 2);
  EXPECT_EQ(packed_vec(127, 127), 1);
}

TEST(KernelListing, HeaderLineThenTheGeneratedSource) {
  const KernelSpec spec{KernelKind::forward, DType::bf16, 127, 127, false, 1, "sm_90a"};
  const TuningParams tuning{128, 48, 0, 4, 0};
  const GeneratedKernel g = generate(spec, tuning);
  const std::string listing = kernel_listing(spec, tuning, false);
  const std::string first_line = listing.substr(0, listing.find('\n'));
  EXPECT_EQ(first_line, "// " + spec.to_string() + " | " + tuning.to_string() +
                            " | shared memory " + std::to_string(g.shared_bytes) +
                            " bytes per CTA (sm_90a allows 232448)");
  EXPECT_EQ(listing.substr(first_line.size() + 1), g.source);
  EXPECT_EQ(listing.find("// ---- file:"), std::string::npos);
}

TEST(KernelListing, SaysWhenSharedMemoryExceedsTheArch) {
  const KernelSpec spec{KernelKind::forward, DType::bf16, 512, 512, false, 8, "sm_86"};
  const std::string listing = kernel_listing(spec, {128, 128, 0, 8, 0}, false);
  EXPECT_NE(listing.find("(sm_86 allows 101376), too much"), std::string::npos) << listing;
}

TEST(KernelListing, IncludedHeadersComeAfterTheirIncludes) {
  const KernelSpec spec{KernelKind::backward_atomic, DType::f16, 64, 64, true, 8, "sm_90a"};
  const std::vector<std::string> names =
      included_headers(generate(spec, {64, 32, 0, 4, 0}).source);
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "kernels/backward_key_value/mma_sync.cuh");  // the one the source names
  EXPECT_EQ(names.front(), "params.cuh");              // common.cuh's only include
  EXPECT_LT(position(names, "common.cuh"), position(names, "kernels/row_kernels.cuh"));
  EXPECT_LT(position(names, "softmax/row_stats.cuh"), position(names, "kernels/row_kernels.cuh"));
  EXPECT_LT(position(names, "arch/mma.cuh"), position(names, "arch/warp_gemm.cuh"));
  EXPECT_EQ(position(names, "kernels/forward/mma_sync.cuh"), names.size());  // not included
  for (const std::string& name : names)
    EXPECT_EQ(std::count(names.begin(), names.end(), name), 1) << name;
}

TEST(KernelListing, HeadersFollowTheSourceEachUnderItsName) {
  const KernelSpec spec{KernelKind::convert_grad_q, DType::bf16, 64, 64, false, 8, "sm_90a"};
  const std::string listing = kernel_listing(spec, {}, true);
  const std::string source = generate(spec, {}).source;
  std::size_t previous = listing.find(source);
  ASSERT_NE(previous, std::string::npos);
  for (const std::string& name : included_headers(source)) {
    const std::size_t at = listing.find("\n// ---- file: " + name + " ----\n");
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_GT(at, previous) << name;
    previous = at;
  }
}

}  // namespace
}  // namespace flashgen::cli
