// The score modifiers of the CPU backend (soft cap, ALiBi): the one place
// every instruction-set path shares. They run on one row of a raw score tile
// (S = Q·Kᵀ, or Sᵀ = K·Qᵀ) right after its GEMM and leave the modified,
// scaled scores in natural-log units (with a user mask too, which then
// overwrites the masked ones: mask_program.hpp),
//   x = scale · s;  x <- softcap · tanh(x / softcap);  x <- x - slope · |i + Skv - Sq - j|,
// which the tile kernels' softmax steps (tile_math.hpp) then read with
// scale_log2() = log2(e) in place of scale · log2(e). Without modifiers
// nothing runs and the softmax steps take the raw scores as before.
#pragma once

#include <cstdint>

#include "common/problem.hpp"

namespace flashgen::cpu {

class ScoreModifier {
 public:
  explicit ScoreModifier(const Problem& p);

  // A user mask makes it active too: the mask then overwrites scores that
  // are already scaled, and kMaskedScore stays masked whatever the scale's sign.
  bool active() const { return softcap_ > 0.0f || alibi_ || mask_; }
  bool has_softcap() const { return softcap_ > 0.0f; }
  // The factor the softmax steps apply to this problem's score tiles.
  float scale_log2() const { return scale_log2_; }

  // Query-major row: query `query` of (batch, head); column c is key key0 + c.
  // `derivative` (null in the forward, used with a soft cap) receives
  // d x_modified / d x = 1 - tanh²(x / softcap) per column.
  void query_row(float* scores, int n, std::int64_t batch, std::int64_t head, std::int64_t query,
                 std::int64_t key0, float* derivative) const;
  // Key-major row: key `key`; column c is query query0 + c.
  void key_row(float* scores, int n, std::int64_t batch, std::int64_t head, std::int64_t key,
               std::int64_t query0, float* derivative) const;

  // The score gradient through the soft cap: ds[c] *= derivative[c].
  static void chain(float* ds, const float* derivative, int n);

 private:
  // Column c's ALiBi distance is |first + step · c|.
  void apply(float* scores, int n, float slope, std::int64_t first, std::int64_t step,
             float* derivative) const;

  const Problem& p_;
  float scale_, softcap_, scale_log2_;
  bool alibi_, mask_;
};

}  // namespace flashgen::cpu
