#include "attention_case.hpp"

#include <cmath>

namespace flashgen::testing {

std::string Case::to_string() const {
  std::string name = "b" + std::to_string(batch) + "_sq" + std::to_string(seq_q) + "_skv" +
                     std::to_string(seq_kv) + "_hq" + std::to_string(heads_q) + "_hkv" +
                     std::to_string(heads_kv) + "_d" + std::to_string(dim_qk);
  if (dim_v != dim_qk) name += "_dv" + std::to_string(dim_v);
  if (causal) name += "_causal";
  name += "_";
  name += flashgen::to_string(dtype);
  name += "_";
  name += testing::to_string(layout);
  if (placement == Placement::ends_at_unmapped_page) name += "_page_end";
  const auto side = [](std::int64_t w) { return w < 0 ? std::string("m") : std::to_string(w); };
  if (has_window()) name += "_window" + side(window_left) + "_" + side(window_right);
  if (alignment == CausalAlignment::top_left) name += "_top_left";
  if (softcap > 0.0) {
    std::string cap = std::to_string(softcap);
    cap.erase(cap.find_last_not_of('0') + 1);
    if (cap.back() == '.') cap.pop_back();
    for (char& ch : cap)
      if (ch == '.') ch = 'p';
    name += "_softcap" + cap;
  }
  if (sinks) name += "_sinks";
  if (alibi > 0) name += "_alibi" + std::to_string(alibi);
  if (user_mask > 0) name += "_mask" + std::to_string(user_mask);
  return name;
}

Problem Case::problem(const Options& options) const {
  Problem p;
  p.batch = batch;
  p.seq_q = seq_q;
  p.seq_kv = seq_kv;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.dim_qk = dim_qk;
  p.dim_v = dim_v;
  p.dtype = dtype;
  p.causal = causal;
  p.scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(dim_qk)));
  copy_score_options(options, p);
  return p;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.to_string(); }

float alibi_slope_value(std::int64_t b, std::int64_t h) {
  return std::ldexp(1.0f + 0.25f * static_cast<float>(b), static_cast<int>(-(h + 1)));
}

float sink_value(std::int64_t h, std::int64_t heads_q) {
  return -1.0f + 3.0f * static_cast<float>(h) / static_cast<float>(heads_q);
}

namespace {

constexpr bool kCausal = true, kFull = false;
constexpr DType f16 = DType::f16, bf16 = DType::bf16, f32 = DType::f32;
constexpr Layout bshd = Layout::bshd, bhsd = Layout::bhsd, padded = Layout::padded;

// Shapes both directions run. Reading down a column shows the coverage:
// dims 1 ... 512 and two Dv != Dqk pairs; seq 1, 7, 64, 777 on both sides;
// causal with seq_q < seq_kv, = and > (rows 2, 6, 11: rows that see no key);
// GQA 4 and 7; batch 2 and 3; each layout and dtype several times.
const std::vector<Case>& shared_cases() {
  static const std::vector<Case> cases = {
      // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
      {1, 7, 7, 1, 1, 1, 1, kFull, f32, bshd},
      {2, 64, 7, 4, 4, 2, 2, kCausal, bf16, bhsd},
      {1, 1, 64, 7, 1, 3, 3, kFull, f16, padded},
      {1, 64, 64, 4, 1, 8, 8, kCausal, bf16, bshd},
      {2, 7, 777, 2, 2, 40, 40, kCausal, f16, bshd},
      {1, 777, 64, 4, 1, 64, 64, kCausal, bf16, padded},
      {2, 64, 64, 1, 1, 64, 64, kFull, f32, bhsd},
      {1, 64, 777, 7, 1, 77, 77, kFull, bf16, bhsd},
      {1, 777, 777, 1, 1, 127, 127, kCausal, bf16, bshd},
      {2, 64, 7, 2, 1, 128, 128, kFull, f16, padded},
      {1, 7, 1, 1, 1, 128, 128, kCausal, f32, bshd},
      {1, 64, 64, 4, 4, 199, 199, kCausal, f16, bhsd},
      {1, 7, 64, 1, 1, 256, 256, kFull, bf16, bshd},
      {1, 64, 7, 4, 4, 257, 257, kFull, f32, padded},
      {1, 7, 7, 7, 1, 385, 385, kCausal, bf16, padded},
      {1, 64, 64, 4, 1, 192, 128, kCausal, bf16, bshd},
      {1, 1, 1, 1, 1, 64, 64, kFull, bf16, bshd},
      {1, 1, 7, 4, 4, 512, 512, kCausal, f32, bhsd},
      {1, 1, 777, 4, 1, 128, 128, kFull, bf16, padded},
      {3, 64, 1, 2, 2, 64, 64, kCausal, f16, bshd},
      {1, 777, 7, 7, 7, 40, 40, kFull, f32, bhsd},
      // A typical decoder layer: GQA 4, batch 2, causal, square.
      {2, 777, 777, 8, 2, 128, 128, kCausal, bf16, bhsd},
  };
  return cases;
}

}  // namespace

std::vector<Case> standard_forward_cases() {
  std::vector<Case> cases = shared_cases();
  // The largest shapes: D = 512 (and 576 / 512) at long sequences.
  cases.push_back({1, 777, 777, 1, 1, 512, 512, kFull, bf16, bshd});
  cases.push_back({1, 64, 777, 1, 1, 576, 512, kFull, f16, bhsd});
  return cases;
}

std::vector<Case> empty_cases() {
  return {
      // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
      {0, 64, 64, 4, 2, 64, 64, kFull, bf16, bshd},
      {0, 7, 77, 2, 1, 127, 40, kCausal, f16, bhsd},
      {2, 64, 77, 0, 2, 64, 64, kFull, bf16, bshd},
      {1, 65, 65, 0, 1, 127, 127, kCausal, f32, padded},
      {1, 64, 64, 0, 0, 128, 128, kFull, bf16, bhsd},
      {2, 0, 64, 4, 2, 64, 64, kFull, bf16, bshd},
      {1, 64, 0, 4, 4, 40, 40, kCausal, f16, bshd},
  };
}

std::vector<Case> page_end_cases() {
  std::vector<Case> cases = {
      // batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v, causal, dtype, layout
      {1, 130, 130, 1, 1, 385, 385, kFull, bf16, bshd},
      {1, 130, 130, 2, 2, 127, 127, kCausal, bf16, bshd},
      {1, 65, 129, 2, 2, 199, 63, kFull, f16, bhsd},
      {1, 257, 257, 2, 2, 68, 68, kFull, bf16, bshd},
      {1, 130, 130, 3, 3, 66, 66, kCausal, f16, bshd},
      {1, 300, 300, 2, 2, 64, 64, kFull, bf16, bshd},
      {1, 130, 77, 4, 2, 128, 128, kCausal, bf16, bshd},
      {1, 65, 65, 2, 2, 256, 256, kCausal, bf16, bshd},
      {1, 257, 257, 2, 1, 320, 320, kFull, bf16, bshd},
      {1, 65, 65, 1, 1, 512, 512, kCausal, bf16, bshd},
      {1, 130, 130, 2, 2, 64, 64, kCausal, f32, bshd},
      {1, 65, 65, 2, 1, 40, 40, kFull, f32, bhsd},
      {1, 7, 7, 1, 1, 1, 1, kFull, f32, padded},
  };
  for (Case& c : cases) c.placement = Placement::ends_at_unmapped_page;
  return cases;
}

std::vector<Case> standard_backward_cases() {
  std::vector<Case> cases = shared_cases();
  cases.push_back({1, 64, 777, 1, 1, 512, 512, kCausal, bf16, bshd});
  cases.push_back({1, 64, 64, 1, 1, 576, 512, kFull, f16, bhsd});
  return cases;
}

}  // namespace flashgen::testing
