// Test tensors with guard bands, in host or CUDA memory (make_storage), so the
// same checks serve every backend.
//
// Storage layout: [guard][extent of the view][guard], or [guard][extent] for
// Placement::ends_at_unmapped_page (the view's last byte is the last mapped
// one, so an access past it faults). Every byte that is not
// an element of the view (the guards, and the gaps of padded or transposed
// layouts) holds a position-dependent pattern, so a write outside the tensor
// is caught wherever it lands. Inputs hold random values; outputs are
// poisoned with a NaN bit pattern before each call, so an element the
// library forgets to write is caught too.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device_storage.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::testing {

// How a [batch, seq, heads, dim] tensor lies in memory.
enum class Layout {
  bshd,    // packed [batch, seq, heads, dim] (flash_attn_func)
  bhsd,    // packed [batch, heads, seq, dim] seen through strides (SDPA)
  padded,  // bshd with rows kPaddedRowExtra elements longer than dim
};
const char* to_string(Layout layout);

// Extra elements between rows of the padded layout (dim 64 rows start 72 apart).
inline constexpr std::int64_t kPaddedRowExtra = 8;
// Bytes of pattern before and after the extent; 256 keeps the first element
// as aligned as the allocation (cuMemAlloc gives 256 bytes).
inline constexpr std::size_t kGuardBytes = 256;

// Bit patterns written into output elements before a call (quiet NaNs with a
// payload no computation produces).
inline constexpr std::uint32_t kPoisonF32 = 0x7fc0dead;
inline constexpr std::uint16_t kPoisonBf16 = 0x7fc1;
inline constexpr std::uint16_t kPoisonF16 = 0x7e01;
inline constexpr std::uint8_t kPoisonE4m3 = 0x7f;  // e4m3 has one NaN (per sign)

// A strided tensor of rank 4 ([batch, seq, heads, dim], any dtype) or rank 3
// ([batch, heads, seq], fp32 row statistics) in guarded storage.
class TestTensor {
 public:
  // Rank 4 in the given layout.
  TestTensor(MemoryKind memory, DType dtype, std::int64_t batch, std::int64_t seq,
             std::int64_t heads, std::int64_t dim, Layout layout,
             Placement placement = Placement::plain);
  // Rank 3 fp32, contiguous [batch, heads, seq].
  static TestTensor row_stats(MemoryKind memory, std::int64_t batch, std::int64_t heads,
                              std::int64_t seq, Placement placement = Placement::plain);

  TensorView view() const;           // rank 4
  RowStatsView stats_view() const;   // rank 3
  DType dtype() const { return dtype_; }
  std::int64_t numel() const { return static_cast<std::int64_t>(element_offsets_.size()); }

  // Values ~ N(0, 1) rounded to the dtype, deterministic in `seed`.
  void fill_random(std::uint64_t seed);
  // Every element set to the dtype's poison pattern.
  void poison();
  // Every element of head `head` (rank 4) set to `value` (an Inf, a NaN).
  void fill_head(std::int64_t head, float value);
  // Every element of rows [first, end) along axis 1 (rank 4: tokens of a
  // packed sequence) set to `value`.
  void fill_rows(std::int64_t first, std::int64_t end, float value);

  // Takes the storage's current contents as what check_unchanged expects
  // (after a forward wrote the O and LSE a backward then reads).
  void snapshot();

  // The whole storage (guards included) as it is now.
  std::vector<unsigned char> download() const;

  // "" when `now` equals what was last uploaded, byte for byte (inputs).
  std::string check_unchanged(const std::vector<unsigned char>& now) const;
  // "" when every byte outside the elements is unchanged (outputs).
  std::string check_outside_unchanged(const std::vector<unsigned char>& now) const;
  // "" when no element still holds the poison pattern (outputs).
  std::string check_all_written(const std::vector<unsigned char>& now) const;

  // Element values of `now`, packed in index order ([b, s, h, d] or [b, h, s]).
  std::vector<double> values(const std::vector<unsigned char>& now) const;
  // A host view with this tensor's strides over `now` (e.g. for the reference).
  TensorView host_view(std::vector<unsigned char>& now) const;

  // "[b, s, h, d]" (or "[b, h, s]") of the element at packed index i.
  std::string index_text(std::int64_t i) const;
  // Where byte `byte` of the image lies: an element, padding or a guard band.
  std::string describe_byte(std::size_t byte) const;

 private:
  // Axes beyond `rank` are ignored.
  TestTensor(MemoryKind memory, DType dtype, int rank, const std::array<std::int64_t, 4>& shape,
             const std::array<std::int64_t, 4>& stride, Placement placement);
  void upload_image();

  MemoryKind memory_;
  DType dtype_;
  int rank_;
  std::int64_t shape_[4] = {1, 1, 1, 1};
  std::int64_t stride_[4] = {0, 0, 0, 0};
  std::size_t element_bytes_;
  std::size_t trailing_guard_;  // kGuardBytes, or 0 where the extent ends the mapping
  std::unique_ptr<Storage> storage_;
  std::vector<std::size_t> element_offsets_;  // byte offset in storage, packed index order
  std::vector<bool> is_element_byte_;         // per storage byte
  std::vector<unsigned char> image_;          // storage content as last uploaded
};

// Seeds derived from a readable name (e.g. a case name plus "q"), so every
// tensor of every case has its own fixed values.
std::uint64_t seed_from(const std::string& name);

}  // namespace flashgen::testing
