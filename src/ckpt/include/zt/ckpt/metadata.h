#pragma once
// The checkpoint format's metadata.json (Note [checkpoint format] in checkpoint.cpp), read and
// validated without the engine: what the loader, export, the tools and the fuzz target share.
#include <string>

#include <nlohmann/json.hpp>

namespace zt::ckpt {

// 2: metadata.json carries its own checksum (Note [metadata checksum]); 1 is refused, since a
// file without one could be edited unseen.
constexpr int kCheckpointFormat = 2;

// A checkpoint tag is a plain name: 1 to 128 of [A-Za-z0-9._+-], not starting with '.', not
// 'latest', without '.partial'. check_tag throws ErrorKind::checkpoint saying so, with `what`
// (e.g. "--tag", "ckpt/latest names") before the tag shown printable.
bool valid_tag(const std::string& tag);
void check_tag(const std::string& tag, const std::string& what);

// xxh64 (16 hex digits) of `m` as compact JSON without its "metadata_xxh64" field: what a save
// writes into that field and read_metadata verifies.
std::string metadata_checksum(const nlohmann::json& m);

// A small file read whole (metadata.json, `latest`): a FIFO, device or folder is refused before
// it is read, and so is one larger than `limit` bytes; errors are ErrorKind::checkpoint.
std::string read_small_file(const std::string& path, size_t limit);

// rank_00003.bin: the shard file saving rank r writes.
std::string shard_file_name(int rank);

// metadata.json of a checkpoint folder, every field the loader, the tools and a resumed run use
// checked for type and range, then its checksum (Note [checkpoint metadata validation]);
// parse_metadata does it on text.
nlohmann::json read_metadata(const std::string& path);
nlohmann::json parse_metadata(const std::string& text, const std::string& file);

}  // namespace zt::ckpt
