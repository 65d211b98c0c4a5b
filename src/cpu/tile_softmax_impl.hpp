// The forward's online-softmax step (tile_math.hpp: online_softmax_row) as a
// template over where P goes and how exactly exp2 computes it, so that the
// fp32 tables write P over the scores and the bf16 tables write it rounded
// to bf16 straight into the P·V GEMM's packed operand, from one loop.
// Included inside a kernel file's namespace after tile_vector_impl.hpp.

// `write(j, p0, p1)` takes P of columns [j, j + 2 · kLanes), `write(j, p0)`
// the last kLanes columns when n is an odd multiple of kLanes.
//
// Both passes run two vectors per step into two accumulators: one chain of
// dependent max or add instructions per vector would hold each pass to their
// latency (with 16 lanes: 2.97 against 2.62 G scores/s at 256 columns, the
// cheaper exp2 included).
template <int kDegree, class WriteP>
[[gnu::always_inline]] inline float online_softmax_step(const float* scores, int n,
                                                        int visible_begin, int visible_end,
                                                        float scale_log2, float& row_max,
                                                        float& row_sum, WriteP&& write) {
  // The row's max of S·c is (max of S)·c when c > 0 (rounding is monotonic),
  // so the first pass only reads; the second forms S·c - max in one
  // multiply-add.
  const bool positive_scale = scale_log2 > 0.0f;
  auto inside = [&](int j) { return j >= visible_begin && j + kLanes <= visible_end; };
  auto visible = [&](int j) {
    const Vec s = positive_scale ? load(scores + j) : load(scores + j) * scale_log2;
    return inside(j) ? s : mask_outside(s, j, visible_begin, visible_end);
  };
  Vec max0 = splat(kMaskedScore), max1 = max0;
  int j = 0;
  for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
    max0 = vmax(max0, visible(j));
    max1 = vmax(max1, visible(j + kLanes));
  }
  if (j < n) max0 = vmax(max0, visible(j));
  const float old_max = row_max;
  const float block_row_max = horizontal_max(vmax(max0, max1));
  const float scaled_block_max =
      positive_scale && block_row_max != kMaskedScore ? block_row_max * scale_log2 : block_row_max;
  const float new_max = old_max > scaled_block_max ? old_max : scaled_block_max;
  // While every score so far is masked, subtract 0 instead of the (masked)
  // max: then P = exp2(masked) = 0 rather than exp2(0) = 1.
  const float reference = new_max == kMaskedScore ? 0.0f : new_max;
  auto probabilities = [&](int j) {
    Vec x = load(scores + j) * scale_log2 - reference;
    if (!inside(j)) x = mask_outside(x, j, visible_begin, visible_end);
    // x <= 0 up to the rounding of s·c - max: no upper clamp needed.
    return exp2_vec<kDegree, Exp2Range::at_most_zero>(x);
  };
  Vec sum0{}, sum1{};
  for (j = 0; j + 2 * kLanes <= n; j += 2 * kLanes) {
    const Vec p0 = probabilities(j), p1 = probabilities(j + kLanes);
    sum0 += p0;
    sum1 += p1;
    write(j, p0, p1);
  }
  if (j < n) {
    const Vec p0 = probabilities(j);
    sum0 += p0;
    write(j, p0);
  }
  // The accurate exp2 whatever kDegree: the factor rescales the running sum
  // and O, not one bf16 P. Exactly 1 when the max stays.
  const float correction = exp2_vec(splat(old_max - reference))[0];
  row_max = new_max;
  row_sum = row_sum * correction + horizontal_sum(sum0 + sum1);
  return correction;
}
