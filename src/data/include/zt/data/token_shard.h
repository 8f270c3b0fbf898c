#pragma once
// Token shards in llm.c's .bin format: a header of 256 int32 (magic 20240520, version 1, token
// count, the rest 0), then that many uint16 tokens. The reader checks the header and the size
// and names the file and the byte offset of what is wrong (ErrorKind::data).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zt::data {

inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;
inline constexpr size_t kTokenShardHeaderBytes = 256 * sizeof(int32_t);

std::vector<uint16_t> read_token_shard(const std::string& path);
// The same from bytes in memory (fuzzing); `name` stands for the file in errors.
std::vector<uint16_t> parse_token_shard(const void* data, size_t size, const std::string& name = "<memory>");
// Written under a temporary name, fsynced, then renamed (an existing file is replaced only whole).
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens);

// The shards dir/<prefix>_*.bin in name order (prepare numbers them, so this is their order);
// none, or a folder that cannot be listed, is ErrorKind::data naming the folder.
std::vector<std::string> list_token_shards(const std::string& dir, const std::string& prefix);
// Their tokens one after another.
std::vector<uint16_t> read_token_shards(const std::vector<std::string>& paths);

}  // namespace zt::data
