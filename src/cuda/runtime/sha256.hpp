// SHA-256 (FIPS 180-4) for kernel cache keys: a file name derived from the
// key must not collide across the sources, options and versions it covers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashgen::cuda {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t bytes);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // Finishes the message; the object must not be updated afterwards.
  std::array<std::uint8_t, 32> digest();
  std::string hex_digest();  // 64 lowercase hex characters

 private:
  void compress(const std::uint8_t* block);  // one 64-byte block

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view text);

}  // namespace flashgen::cuda
