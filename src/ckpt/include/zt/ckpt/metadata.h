#pragma once
// The checkpoint format's metadata.json (Note [checkpoint format] in checkpoint.cpp), read and
// validated without the engine: what the loader, export, the tools and the fuzz target share.
#include <string>

#include <nlohmann/json.hpp>

namespace zt::ckpt {

constexpr int kCheckpointFormat = 1;

// rank_00003.bin: the shard file saving rank r writes.
std::string shard_file_name(int rank);

// metadata.json of a checkpoint folder, every field the loader and tools use checked for type
// and range (Note [checkpoint metadata validation]); parse_metadata does it on text.
nlohmann::json read_metadata(const std::string& path);
nlohmann::json parse_metadata(const std::string& text, const std::string& file);

}  // namespace zt::ckpt
