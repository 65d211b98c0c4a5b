// The test harness must catch what it claims to catch; these tests break
// each rule on purpose (host memory, no library call involved).
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attention_case.hpp"
#include "attention_check.hpp"
#include "common/dtype.hpp"
#include "test_tensor.hpp"

namespace flashgen::testing {
namespace {

// Writes `value` into byte `at` of the tensor's storage through its view
// (at may be negative: the guard band before the first element).
void poke(const TestTensor& t, std::ptrdiff_t at, unsigned char value) {
  static_cast<unsigned char*>(t.view().data)[at] = value;
}

TEST(Harness, LayoutsHaveTheDocumentedStrides) {
  const TestTensor bshd(MemoryKind::host, DType::bf16, 2, 5, 3, 64, Layout::bshd);
  const TestTensor bhsd(MemoryKind::host, DType::bf16, 2, 5, 3, 64, Layout::bhsd);
  const TestTensor padded(MemoryKind::host, DType::bf16, 2, 5, 3, 64, Layout::padded);
  const std::int64_t expect_bshd[4] = {5 * 3 * 64, 3 * 64, 64, 1};
  const std::int64_t expect_bhsd[4] = {3 * 5 * 64, 64, 5 * 64, 1};
  const std::int64_t expect_padded[4] = {5 * 3 * 72, 3 * 72, 72, 1};  // rows 72 apart
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(bshd.view().stride[i], expect_bshd[i]);
    EXPECT_EQ(bhsd.view().stride[i], expect_bhsd[i]);
    EXPECT_EQ(padded.view().stride[i], expect_padded[i]);
  }
  // Host storage guarantees 16-byte alignment (device storage 256); the guard
  // band, a multiple of 256 bytes, keeps the first element that aligned.
  constexpr std::uintptr_t kHostAlignment = 16;
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(bshd.view().data) % kHostAlignment, 0u);
}

TEST(Harness, RandomValuesAreFixedNonZeroAndOfUnitScale) {
  TestTensor a(MemoryKind::host, DType::f32, 1, 64, 2, 32, Layout::bshd);
  TestTensor b(MemoryKind::host, DType::f32, 1, 64, 2, 32, Layout::bhsd);
  a.fill_random(5);
  b.fill_random(5);
  const std::vector<double> x = a.values(a.download()), y = b.values(b.download());
  EXPECT_EQ(x, y) << "the same seed gives the same values in any layout";
  double sum_squares = 0.0;
  for (double e : x) sum_squares += e * e;
  const double rms = std::sqrt(sum_squares / static_cast<double>(x.size()));
  EXPECT_GT(rms, 0.8);
  EXPECT_LT(rms, 1.2);
  a.fill_random(6);
  EXPECT_NE(a.values(a.download()), x);
}

TEST(Harness, CatchesWritesIntoGuardsAndGaps) {
  TestTensor t(MemoryKind::host, DType::bf16, 1, 2, 2, 4, Layout::padded);
  t.poison();
  EXPECT_EQ(t.check_outside_unchanged(t.download()), "");
  poke(t, -1, 0);  // just before the first element
  EXPECT_NE(t.check_outside_unchanged(t.download()).find("guard band before"), std::string::npos);

  TestTensor gap(MemoryKind::host, DType::bf16, 1, 2, 2, 4, Layout::padded);
  gap.poison();
  poke(gap, 4 * 2, 0);  // first byte after row 0's four elements
  EXPECT_NE(gap.check_outside_unchanged(gap.download()).find("gap"), std::string::npos);

  TestTensor after(MemoryKind::host, DType::f32, 1, 3, 1, 2, Layout::bshd);
  after.poison();
  poke(after, 3 * 2 * 4, 0);  // the byte after the last element
  EXPECT_NE(after.check_outside_unchanged(after.download()).find("guard band after"),
            std::string::npos);
}

TEST(Harness, CatchesUnwrittenElementsAndChangedInputs) {
  TestTensor out(MemoryKind::host, DType::f16, 1, 3, 2, 5, Layout::bhsd);
  out.poison();
  EXPECT_NE(out.check_all_written(out.download()), "");
  // Write every element but [0, 2, 1, 4].
  TensorView v = out.view();
  for (int s = 0; s < 3; ++s)
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 5; ++d)
        if (!(s == 2 && h == 1 && d == 4))
          store_from_float(v.data, v.dtype, s * v.stride[1] + h * v.stride[2] + d, 0.5f);
  const std::string unwritten = out.check_all_written(out.download());
  EXPECT_NE(unwritten.find("1 of 30"), std::string::npos) << unwritten;
  EXPECT_NE(unwritten.find("[0, 2, 1, 4]"), std::string::npos) << unwritten;

  TestTensor in(MemoryKind::host, DType::bf16, 1, 3, 2, 5, Layout::bshd);
  in.fill_random(1);
  EXPECT_EQ(in.check_unchanged(in.download()), "");
  poke(in, 6, 0x12);
  EXPECT_NE(in.check_unchanged(in.download()), "");
}

TEST(Harness, ToleranceRuleRejectsLargeErrorsAndNaN) {
  const TestTensor where(MemoryKind::host, DType::bf16, 1, 1, 1, 4, Layout::bshd);
  const std::vector<double> ref = {1.0, -0.5, 0.25, 2.0};
  const std::vector<double> naive = {1.0 + 1e-3, -0.5, 0.25, 2.0};
  // Allowed: 2 · 1e-3 + absolute_slack(bf16) · max|ref| = 0.002 + 2^-8 · 2.
  const double allowed = 2e-3 + absolute_slack(DType::bf16) * 2.0;
  EXPECT_EQ(tolerance_violation("o", where, {1.0, -0.5, 0.25, 2.0 + 0.99 * allowed}, ref, naive,
                                DType::bf16),
            "");
  const std::string too_far = tolerance_violation(
      "o", where, {1.0, -0.5, 0.25, 2.0 + 1.01 * allowed}, ref, naive, DType::bf16);
  EXPECT_NE(too_far.find("[0, 0, 0, 3]"), std::string::npos) << too_far;
  EXPECT_NE(tolerance_violation("o", where, {1.0, NAN, 0.25, 2.0}, ref, naive, DType::bf16)
                .find("NaN"),
            std::string::npos);
  // -inf (a row that sees no key) must come out exactly.
  const std::vector<double> lse_ref = {-INFINITY, 1.0, 1.0, 1.0};
  EXPECT_EQ(tolerance_violation("lse", where, lse_ref, lse_ref, lse_ref, DType::f32), "");
  EXPECT_NE(tolerance_violation("lse", where, {0.0, 1.0, 1.0, 1.0}, lse_ref, lse_ref,
                                DType::f32),
            "");
}

TEST(Harness, CaseNamesAreValidAndDistinct) {
  std::set<std::string> names;
  for (const auto& list : {standard_forward_cases(), standard_backward_cases()}) {
    std::set<std::string> in_list;
    for (const Case& c : list) {
      const std::string name = c.to_string();
      for (char ch : name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
      EXPECT_TRUE(in_list.insert(name).second) << "duplicate " << name;
    }
  }
  const Case c{2, 7, 64, 4, 1, 192, 128, true, DType::f16, Layout::bhsd};
  EXPECT_EQ(c.to_string(), "b2_sq7_skv64_hq4_hkv1_d192_dv128_causal_f16_bhsd");
}

TEST(Harness, StandardCasesCoverTheContract) {
  std::set<std::int64_t> dims, seqs;
  std::set<std::int64_t> groups;
  bool causal_longer_q = false, causal_longer_kv = false, dv_differs = false, batched = false;
  std::set<DType> dtypes;
  std::set<Layout> layouts;
  for (const auto& list : {standard_forward_cases(), standard_backward_cases()}) {
    for (const Case& c : list) {
      dims.insert(c.dim_qk);
      seqs.insert(c.seq_q);
      seqs.insert(c.seq_kv);
      groups.insert(c.heads_q / c.heads_kv);
      causal_longer_q |= c.causal && c.seq_q > c.seq_kv;
      causal_longer_kv |= c.causal && c.seq_q < c.seq_kv;
      dv_differs |= c.dim_v != c.dim_qk;
      batched |= c.batch > 1;
      dtypes.insert(c.dtype);
      layouts.insert(c.layout);
    }
  }
  for (std::int64_t d : {1, 2, 3, 8, 40, 64, 77, 127, 128, 199, 256, 257, 385, 512})
    EXPECT_TRUE(dims.count(d)) << "no case with dim " << d;
  for (std::int64_t s : {1, 7, 64, 777}) EXPECT_TRUE(seqs.count(s)) << "no case with seq " << s;
  for (std::int64_t g : {1, 4, 7}) EXPECT_TRUE(groups.count(g)) << "no case with GQA " << g;
  EXPECT_TRUE(causal_longer_q && causal_longer_kv && dv_differs && batched);
  EXPECT_EQ(dtypes.size(), 3u);
  EXPECT_EQ(layouts.size(), 3u);
}

}  // namespace
}  // namespace flashgen::testing
