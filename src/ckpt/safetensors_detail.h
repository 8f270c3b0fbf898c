#pragma once
// Private to zt_ckpt: the encoded header that write_safetensors and streaming export write.
#include <string>

#include <nlohmann/json.hpp>

namespace zt::ckpt::detail {

// The 8-byte little-endian length and the JSON header, padded with spaces so the data that
// follows is 8-byte aligned (as the format suggests).
std::string encode_safetensors_header(const nlohmann::json& header);

}  // namespace zt::ckpt::detail
