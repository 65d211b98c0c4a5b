// A user mask as the GPU takes it, without a GPU: the device code the
// generator splices (checked reads and divisions, wrapping int64 + - *),
// the kernel names, and which expressions need the fault check.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/generate.hpp"
#include "codegen/user_mask.hpp"
#include "cuda/user_mask.hpp"

namespace flashgen {
namespace {

const std::vector<mask::ArrayName> kArrays = {{"doc", false}, {"bias", true}};

KernelSpec masked_spec(const char* expression) {
  KernelSpec spec;
  spec.mask_mod = mask::Expression::parse(expression, kArrays).canonical();
  spec.mask_arrays = mask_arrays_text(kArrays);
  return spec;
}

TEST(UserMaskSource, ArraysReadCheckedAndIntegersWrap) {
  const std::string source =
      user_mask_source(masked_spec("doc[kv_idx + 1] == doc[q_idx] && bias[h] * 2 > -b / 3"));
  for (const char* piece :
       {"fg::mask_integer_at(p, 0, fg::mask_add(kv_idx, 1LL), fault)",
        "fg::mask_integer_at(p, 0, q_idx, fault)", "fg::mask_floating_at(p, 1, h, fault)",
        "(fg::mask_floating_at(p, 1, h, fault) * 2LL)",
        "fg::mask_divide(fg::mask_negate(b), 3LL, fault)", " != 0;"})
    EXPECT_NE(source.find(piece), std::string::npos) << piece << " in\n" << source;
}

TEST(UserMaskSource, ArraysRoundTripAndNamesCarryAHash) {
  EXPECT_EQ(mask_arrays_text(kArrays), "doc:i,bias:f");
  const std::vector<mask::ArrayName> parsed = parse_mask_arrays("doc:i,bias:f");
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[1].name, "bias");
  EXPECT_TRUE(parsed[1].floating);
  EXPECT_THROW(parse_mask_arrays("doc"), Error);
  const std::string a = masked_spec("doc[kv_idx] == doc[q_idx]").to_string();
  const std::string b = masked_spec("doc[kv_idx] != doc[q_idx]").to_string();
  EXPECT_NE(a.find(" mask="), std::string::npos) << a;
  EXPECT_NE(a, b);
}

TEST(UserMaskSource, TheGeneratedKernelCarriesTheMask) {
  KernelSpec spec = masked_spec("doc[kv_idx] == doc[q_idx]");
  spec.kind = KernelKind::mask_blocks;
  spec.dim_qk = spec.dim_v = 64;
  const GeneratedKernel g = generate(spec, TuningParams{});
  EXPECT_NE(g.source.find("struct UserMask"), std::string::npos);
  EXPECT_NE(g.source.find("static constexpr bool kMask = true;"), std::string::npos);
  EXPECT_NE(g.source.find("typedef UserMask Mask;"), std::string::npos);
  EXPECT_EQ(g.threads, 256);
}

// Indices whose range (from the problem's extents) the array covers need no
// check; other indices and integer divisions by a non-literal do.
TEST(UserMaskFaults, OnlyWhatCanFaultIsChecked) {
  std::vector<std::int32_t> doc(300);
  std::vector<float> bias(4);
  const auto may_fault = [&](const char* expression, std::int64_t seq_q, std::int64_t seq_kv) {
    Options options;
    options.mask_mod = expression;
    options.mask_tensors = {MaskTensorView::int32("doc", doc.data(), 300),
                            MaskTensorView::float32("bias", bias.data(), 4)};
    Problem p;
    p.batch = 2, p.heads_q = 4, p.heads_kv = 4, p.seq_q = seq_q, p.seq_kv = seq_kv;
    copy_score_options(options, p);
    return cuda::mask_may_fault(p);
  };
  EXPECT_FALSE(may_fault("doc[kv_idx] == doc[q_idx] && bias[h] > 0", 300, 300));
  EXPECT_FALSE(may_fault("q_idx / 7 == kv_idx / 7 && q_idx % 2 == 0", 300, 300));
  EXPECT_TRUE(may_fault("doc[kv_idx] == doc[q_idx]", 300, 301));  // kv_idx reaches 300
  EXPECT_TRUE(may_fault("doc[kv_idx] == doc[q_idx]", 301, 300));  // q_idx starts at -1
  EXPECT_TRUE(may_fault("doc[kv_idx - 1] == 0", 300, 300));
  EXPECT_TRUE(may_fault("bias[b + 3] > 0", 300, 300));  // b + 3 reaches 4
  EXPECT_FALSE(may_fault("bias[b + 2] > 0", 300, 300));
  // Affine indices, as a boolean attn_mask's copy is read (batch 2, 4 heads).
  EXPECT_TRUE(may_fault("bias[b * 2 + h / 2] > 0", 300, 300));  // a division: no bound
  EXPECT_TRUE(may_fault("bias[b * 2 + h] > 0", 300, 300));   // reaches 5
  EXPECT_FALSE(may_fault("bias[(b * 0 + h) * 1] > 0", 300, 300));
  EXPECT_FALSE(may_fault("doc[(q_idx - 1) * 0 + kv_idx] != 0", 300, 300));
  EXPECT_FALSE(may_fault("doc[q_idx < 5 ? 0 : kv_idx] != 0", 300, 300));
  // ?: takes both branches' ranges (a guard in the condition is not used).
  EXPECT_TRUE(may_fault("doc[kv_idx >= 10 ? kv_idx - 10 : 0] != 0", 300, 300));
  EXPECT_TRUE(may_fault("doc[doc[kv_idx]] != 0", 300, 300));  // an element indexes
  EXPECT_TRUE(may_fault("q_idx / (kv_idx + 1) == 0", 300, 300));
  EXPECT_TRUE(may_fault("q_idx % -1 == 0", 300, 300));
  EXPECT_FALSE(may_fault("q_idx / 2.0 > kv_idx", 300, 300));  // float division
}

}  // namespace
}  // namespace flashgen
