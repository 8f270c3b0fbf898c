// SHA-256 against FIPS 180-4's vectors, across block boundaries and streamed updates.
#include <gtest/gtest.h>

#include <string>

#include "common/temp_dir.h"
#include "zt/core/error.h"
#include "zt/core/sha256.h"

namespace zt {
namespace {

TEST(Sha256, MatchesTheStandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecewiseUpdatesEqualOneUpdate) {
  std::string text;
  for (int i = 0; i < 300; ++i) text.push_back(char(i * 31 + 7));
  for (size_t piece : {1, 3, 55, 56, 63, 64, 65, 200}) {
    Sha256 s;
    for (size_t at = 0; at < text.size(); at += piece) s.update(text.substr(at, piece));
    EXPECT_EQ(s.hex(), sha256_hex(text)) << "pieces of " << piece;
  }
}

class Sha256File : public testing_util::TempDirTest {};

TEST_F(Sha256File, HashesAFileAndRefusesAFolder) {
  EXPECT_EQ(sha256_file(write("f", "abc")), sha256_hex("abc"));
  EXPECT_THROW(sha256_file(dir_.string()), Error);
  EXPECT_THROW(sha256_file(path("missing")), Error);
}

}  // namespace
}  // namespace zt
