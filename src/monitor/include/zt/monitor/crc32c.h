#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing
// (Note [event files] in tensorboard.h); exposed so tests can read the files back.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zt::monitor {

// crc32c("123456789") == 0xE3069283; `crc` continues an earlier call's result.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view s) { return crc32c(s.data(), s.size()); }

// TFRecord's masked CRC: a CRC stored beside the data it covers is rotated and offset, so a
// CRC of bytes that themselves hold CRCs does not degenerate.
inline uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace zt::monitor
