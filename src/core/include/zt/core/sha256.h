#pragma once
// SHA-256 (FIPS 180-4), for recording which input files a derived data set was made from.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zt {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex();  // 64 lowercase hex digits; the object is spent afterwards

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t bytes_ = 0;
};

std::string sha256_hex(std::string_view data);
// Streams the file; a file that cannot be read is ErrorKind::data naming it.
std::string sha256_file(const std::string& path);

}  // namespace zt
