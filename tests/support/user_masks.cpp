#include "user_masks.hpp"

namespace flashgen::testing {

MaskArrays::MaskArrays(std::int64_t positions, std::int64_t batch, std::int64_t heads) {
  const std::int64_t lengths[] = {37, 1, 90, 130, 64, 200};
  std::int64_t at = 0;
  for (std::int32_t d = 0; static_cast<std::int64_t>(doc.size()) < positions; ++d)
    for (std::int64_t i = 0; i < lengths[d % 6] && at < positions; ++i, ++at) doc.push_back(d);
  for (std::int64_t b = 0; b < batch; ++b)
    prefix.push_back(static_cast<std::int32_t>(17 + 150 * b));
  for (std::int64_t h = 0; h < heads; ++h) bias.push_back(h % 3 == 1 ? -0.5f : 0.25f * h);
}

Options MaskArrays::options(const std::string& expression) const {
  Options o;
  o.backend = Backend::cpu;
  o.mask_mod = expression;
  o.mask_tensors = {
      MaskTensorView::int32("doc", doc.data(), static_cast<std::int64_t>(doc.size())),
      MaskTensorView::int32("prefix", prefix.data(), static_cast<std::int64_t>(prefix.size())),
      MaskTensorView::float32("bias", bias.data(), static_cast<std::int64_t>(bias.size()))};
  return o;
}

const char* test_mask(int n) {
  static const char* const expressions[kTestMasks] = {
      "doc[kv_idx] == doc[q_idx]",
      "kv_idx < prefix[b] || kv_idx <= q_idx",
      "(doc[kv_idx] == doc[q_idx]) && (bias[h] >= 0.0 ? kv_idx % 3 != 1 : q_idx - kv_idx < 40)",
      "kv_idx < 10 ? 1 : doc[kv_idx - 10] * 2.5 - h > 1.5",
      "-(q_idx / (kv_idx % 7 + 1)) + 3 * b != 0 || !(bias[h])",
      "q_idx >= 290 && kv_idx < 5",
      "kv_idx < prefix[b] + 1000 && doc[kv_idx] != 2",
  };
  return expressions[n - 1];
}

}  // namespace flashgen::testing
