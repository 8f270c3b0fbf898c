#pragma once
// Shared by checkpoint save and load (private to zt_ckpt).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "zt/ckpt/metadata.h"
#include "zt/comm/group.h"
#include "zt/core/dtype.h"

namespace zt::ckpt::detail {

using ckpt::shard_file_name;
std::string entry_key(size_t buffer, const std::string& tensor);  // b2.exp_avg

// Every rank passes its own error ("" if none); if any rank failed, every rank throws the same
// AgreedError (ErrorKind::checkpoint): the lowest failing rank's message, naming that rank when
// there are several. No rank is left waiting.
void agree(comm::Group& g, const std::string& error, const std::string& what);

// n elements of a floating dtype at src as f32 (bf16 and f16 widen exactly); hf_folder.cpp.
void widen_f32(const void* src, DType t, int64_t n, float* dst);

}  // namespace zt::ckpt::detail
