#pragma once
// Shared by checkpoint save and load (private to zt_ckpt).
#include <string>

#include <nlohmann/json.hpp>

#include "zt/ckpt/metadata.h"
#include "zt/comm/group.h"

namespace zt::ckpt::detail {

using ckpt::shard_file_name;
std::string entry_key(size_t buffer, const std::string& tensor);  // b2.exp_avg

// Every rank passes its own error ("" if none); if any rank failed, every rank throws the same
// AgreedError (ErrorKind::checkpoint): the lowest failing rank's message, naming that rank when
// there are several. No rank is left waiting.
void agree(comm::Group& g, const std::string& error, const std::string& what);

}  // namespace zt::ckpt::detail
