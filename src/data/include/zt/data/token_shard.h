#pragma once
// Token shards in llm.c's .bin format: a header of 256 int32 (magic 20240520, version, token
// count, the rest 0), then that many tokens: uint16 in version 1, uint32 in version 2 (llm.c's
// format for vocabularies past 65,536 ids). The readers check the header and the size and name
// the file and the byte offset of what is wrong (ErrorKind::data). Training maps shards instead
// of reading them (token_stream.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zt::data {

inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;    // uint16 tokens
inline constexpr int32_t kTokenShardVersion32 = 2;  // uint32 tokens
inline constexpr size_t kTokenShardHeaderBytes = 256 * sizeof(int32_t);

// What a checked header promises: the version and its token width, and the token count.
struct TokenShardHeader {
  int32_t version = kTokenShardVersion;
  size_t count = 0;
  size_t token_bytes() const { return version == kTokenShardVersion32 ? 4 : 2; }
};
// Checks the header at `data` (the file's first min(size, 1024) bytes) of a file of `size` bytes:
// magic, version 1 or 2, count, and the size the count implies, exactly.
TokenShardHeader check_token_shard_header(const void* data, uint64_t size, const std::string& name);
// The version `prepare` writes for a tokenizer of `vocab_size` ids: 1 while every id fits uint16.
int32_t token_shard_version_for(int64_t vocab_size);

// Version 1 only (uint16 tokens); a version 2 shard is a data error at byte offset 4.
std::vector<uint16_t> read_token_shard(const std::string& path);
// The same from bytes in memory (fuzzing); `name` stands for the file in errors.
std::vector<uint16_t> parse_token_shard(const void* data, size_t size, const std::string& name = "<memory>");
// Either version, widened to uint32.
std::vector<uint32_t> read_token_shard32(const std::string& path);
std::vector<uint32_t> parse_token_shard32(const void* data, size_t size, const std::string& name = "<memory>");

// Written under a temporary name, fsynced, then renamed (an existing file is replaced only whole).
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens);
// In `version` 1 (every token must fit uint16) or 2.
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, int32_t version);

// The shards dir/<prefix>_*.bin in name order (prepare numbers them, so this is their order);
// none, or a folder that cannot be listed, is ErrorKind::data naming the folder.
std::vector<std::string> list_token_shards(const std::string& dir, const std::string& prefix);
// The paths `pattern` matches (glob(3)), in name order (byte order, not the locale's); none is ErrorKind::config naming
// `key` (the config key that gave the pattern) and the pattern.
std::vector<std::string> glob_token_shards(const std::string& pattern, const std::string& key);

}  // namespace zt::data
