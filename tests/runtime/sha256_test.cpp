// SHA-256 against the FIPS 180-4 example vectors.
#include <gtest/gtest.h>

#include <string>

#include "cuda/runtime/sha256.hpp"

namespace flashgen::cuda {
namespace {

TEST(Sha256, EmptyMessage) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, Abc) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, TwoBlockMessage) {
  // 56 bytes: the length no longer fits the first block's padding.
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, MillionAs) {
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, StreamingMatchesOneShot) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += char('a' + i % 26);
  Sha256 pieces;
  // Uneven pieces cross block boundaries at every offset.
  for (std::size_t at = 0, step = 1; at < text.size(); at += step, step = step % 97 + 1)
    pieces.update(std::string_view(text).substr(at, step));
  EXPECT_EQ(pieces.hex_digest(), sha256_hex(text));
}

}  // namespace
}  // namespace flashgen::cuda
