// dst[j, i] = src[i, j] for a 16 x 16 block: tile_kernels_impl.hpp's
// transpose, included by it inside its namespace (Vec, load and store are
// its own).

#if FLASHGEN_TILE_VECTOR_LANES == 16
// In four butterfly steps of width w = 8, 4, 2, 1: rows i and i + w (i with
// bit w clear) swap their off-diagonal w x w blocks, one two-register shuffle
// per row and step (vpermt2ps).
constexpr int low_row_lane(int w, int l) { return (l & w) ? kLanes + l - w : l; }
constexpr int high_row_lane(int w, int l) { return (l & w) ? kLanes + l : l + w; }
#define FLASHGEN_LANES_16(f, w)                                                             \
  f(w, 0), f(w, 1), f(w, 2), f(w, 3), f(w, 4), f(w, 5), f(w, 6), f(w, 7), f(w, 8), f(w, 9), \
      f(w, 10), f(w, 11), f(w, 12), f(w, 13), f(w, 14), f(w, 15)

template <int kWidth>
[[gnu::always_inline]] inline void butterfly(Vec (&rows)[16]) {
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    if (i & kWidth) continue;
    const Vec low = rows[i], high = rows[i + kWidth];
    rows[i] = __builtin_shufflevector(low, high, FLASHGEN_LANES_16(low_row_lane, kWidth));
    rows[i + kWidth] = __builtin_shufflevector(low, high, FLASHGEN_LANES_16(high_row_lane, kWidth));
  }
}
#undef FLASHGEN_LANES_16

void transpose_16x16(const float* src, int lds, float* dst, int ldd) {
  Vec rows[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) rows[i] = load(src + static_cast<std::int64_t>(i) * lds);
  butterfly<8>(rows);
  butterfly<4>(rows);
  butterfly<2>(rows);
  butterfly<1>(rows);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) store(dst + static_cast<std::int64_t>(i) * ldd, rows[i]);
}
#else
void transpose_16x16(const float* src, int lds, float* dst, int ldd) {
  for (int j = 0; j < 16; ++j) {
    for (int i = 0; i < 16; ++i) {
      dst[static_cast<std::int64_t>(j) * ldd + i] = src[static_cast<std::int64_t>(i) * lds + j];
    }
  }
}
#endif
