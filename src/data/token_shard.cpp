// Token shards in llm.c's .bin format (token_shard.h): little-endian int32 header, uint16 or
// uint32 tokens.
#include "zt/data/token_shard.h"

#include <glob.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <filesystem>

#include "input_file.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::data {
namespace {

static_assert(std::endian::native == std::endian::little, "token shards are little-endian; so is this code");

int32_t le32(const uint8_t* b) {
  return int32_t(uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24);
}

void check_has_header(uint64_t size, const std::string& name) {
  ZT_CHECK_AS(ErrorKind::data, size >= kTokenShardHeaderBytes, "[data] ", name, ": truncated at byte offset ", size,
              ": a token shard header needs ", kTokenShardHeaderBytes, " bytes but file has ", size, " bytes");
}

// The uint16 readers predate version 2 and cannot hold its tokens.
void check_uint16(const TokenShardHeader& h, const std::string& name) {
  ZT_CHECK_AS(ErrorKind::data, h.version == kTokenShardVersion, "[data] ", name, ": unsupported token shard version ",
              h.version, " at byte offset 4 for a uint16 reader (version 2 holds uint32 tokens: read_token_shard32)");
}

// A checked shard's tokens from its payload, widened to T.
template <typename T>
std::vector<T> tokens_of(const TokenShardHeader& h, const uint8_t* payload) {
  std::vector<T> out(h.count);
  if (h.token_bytes() == sizeof(T)) {
    if (h.count) std::memcpy(out.data(), payload, h.count * sizeof(T));
    return out;
  }
  for (size_t i = 0; i < h.count; ++i) {  // version 1 into uint32
    uint16_t t;
    std::memcpy(&t, payload + 2 * i, 2);
    out[i] = T(t);
  }
  return out;
}

// The header, then the payload, of the file at `path`.
template <typename T>
std::vector<T> read_file(const std::string& path) {
  detail::InputFile f(path);
  check_has_header(f.size(), path);
  uint8_t header[kTokenShardHeaderBytes];
  f.read_at(header, sizeof header, 0);
  const TokenShardHeader h = check_token_shard_header(header, f.size(), path);
  if constexpr (sizeof(T) == 2) check_uint16(h, path);
  std::vector<uint8_t> payload(h.count * h.token_bytes());
  f.read_at(payload.data(), payload.size(), kTokenShardHeaderBytes);
  return tokens_of<T>(h, payload.data());
}

template <typename T>
std::vector<T> parse_bytes(const void* data, size_t size, const std::string& name) {
  const TokenShardHeader h = check_token_shard_header(data, size, name);
  if constexpr (sizeof(T) == 2) check_uint16(h, name);
  return tokens_of<T>(h, static_cast<const uint8_t*>(data) + kTokenShardHeaderBytes);
}

template <typename T>
void write_shard(const std::string& path, const std::vector<T>& tokens, int32_t version) {
  ZT_CHECK_AS(ErrorKind::data, tokens.size() <= size_t(INT32_MAX), "[data] ", path, ": ", tokens.size(),
              " tokens do not fit one shard (its header counts at most ", INT32_MAX, "); split them into several");
  int32_t header[kTokenShardHeaderBytes / sizeof(int32_t)] = {kTokenShardMagic, version, int32_t(tokens.size())};
  AtomicFile out(path, ErrorKind::data, "[data]");
  out.write(header, sizeof header);
  out.write(tokens.data(), tokens.size() * sizeof(T));
  out.commit();
  sync_dir(folder_of(path), ErrorKind::data, "[data]");
}

}  // namespace

// The token count is checked against the file's size before any payload is read (a header
// claiming 2^31 tokens costs nothing).
TokenShardHeader check_token_shard_header(const void* data, uint64_t size, const std::string& name) {
  check_has_header(size, name);
  const uint8_t* h = static_cast<const uint8_t*>(data);
  const int32_t magic = le32(h), version = le32(h + 4), count = le32(h + 8);
  ZT_CHECK_AS(ErrorKind::data, magic == kTokenShardMagic, "[data] ", name,
              ": bad token shard magic at byte offset 0: ", "found ", magic, ", expected ", kTokenShardMagic,
              " (llm.c's .bin format)");
  ZT_CHECK_AS(ErrorKind::data, version == kTokenShardVersion || version == kTokenShardVersion32, "[data] ", name,
              ": unsupported token shard version ", version, " at byte offset 4 (known: ", kTokenShardVersion,
              " = uint16 tokens, ", kTokenShardVersion32, " = uint32 tokens)");
  ZT_CHECK_AS(ErrorKind::data, count >= 0, "[data] ", name, ": negative token count ", count, " at byte offset 8");
  const TokenShardHeader out{version, size_t(count)};
  const uint64_t expected = kTokenShardHeaderBytes + out.token_bytes() * uint64_t(count);
  ZT_CHECK_AS(ErrorKind::data, size >= expected, "[data] ", name, ": truncated at byte offset ", size, ": header says ",
              count, " tokens (expected ", expected, " bytes) but file has ", size, " bytes (version ", version, ": ",
              out.token_bytes(), " bytes a token)");
  ZT_CHECK_AS(ErrorKind::data, size == expected, "[data] ", name, ": ", size - expected,
              " trailing bytes at byte offset ", expected, ": header says ", count, " tokens (expected ", expected,
              " bytes) but file has ", size, " bytes (version ", version, ": ", out.token_bytes(), " bytes a token)");
  return out;
}

int32_t token_shard_version_for(int64_t vocab_size) {
  return vocab_size <= int64_t(UINT16_MAX) + 1 ? kTokenShardVersion : kTokenShardVersion32;
}

std::vector<uint16_t> read_token_shard(const std::string& path) { return read_file<uint16_t>(path); }

std::vector<uint16_t> parse_token_shard(const void* data, size_t size, const std::string& name) {
  return parse_bytes<uint16_t>(data, size, name);
}

std::vector<uint32_t> read_token_shard32(const std::string& path) { return read_file<uint32_t>(path); }

std::vector<uint32_t> parse_token_shard32(const void* data, size_t size, const std::string& name) {
  return parse_bytes<uint32_t>(data, size, name);
}

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  write_shard(path, tokens, kTokenShardVersion);
}

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, int32_t version) {
  ZT_CHECK(version == kTokenShardVersion || version == kTokenShardVersion32, "[data] ", path, ": token shard version ",
           version, " is neither 1 (uint16) nor 2 (uint32)");
  if (version == kTokenShardVersion32) return write_shard(path, tokens, version);
  std::vector<uint16_t> narrow(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    ZT_CHECK_AS(ErrorKind::data, tokens[i] <= UINT16_MAX, "[data] ", path, ": token ", i, " is ", tokens[i],
                ", too large for a version 1 shard (uint16); write version 2");
    narrow[i] = uint16_t(tokens[i]);
  }
  write_shard(path, narrow, version);
}

std::vector<std::string> list_token_shards(const std::string& dir, const std::string& prefix) {
  namespace fs = std::filesystem;
  std::error_code ec;
  ZT_CHECK_AS(ErrorKind::data, fs::is_directory(dir, ec), "[data] ", dir,
              " is not a folder of token shards (zerotrain prepare --out ", dir, " writes them)");
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix + "_", 0) == 0 && e.path().extension() == ".bin") out.push_back(e.path().string());
  }
  ZT_CHECK_AS(ErrorKind::data, !ec, "[data] cannot list ", dir, ": ", ec.message());
  ZT_CHECK_AS(ErrorKind::data, !out.empty(), "[data] no ", prefix, "_*.bin token shards in ", dir,
              " (zerotrain prepare --out ", dir, " writes them)");
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> glob_token_shards(const std::string& pattern, const std::string& key) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
  ::globfree(&g);
  ZT_CHECK_AS(ErrorKind::data, rc == 0 || rc == GLOB_NOMATCH, "[data] ", key, " '", pattern, "': glob failed (",
              rc == GLOB_NOSPACE ? "out of memory" : "a folder could not be read", ")");
  ZT_CHECK_AS(ErrorKind::config, !out.empty(), "[config] '", key, "' pattern '", pattern,
              "' matches no file (llm.c token shards, e.g. data/fineweb10B/fineweb_train_*.bin)");
  std::sort(out.begin(), out.end());  // glob sorts by the locale's collation; shards go by bytes
  return out;
}

}  // namespace zt::data
