// Token shards in llm.c's .bin format (token_shard.h): little-endian int32 header, uint16 tokens.
#include "zt/data/token_shard.h"

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

// The token count a shard's header promises, checked against the file's size before any payload
// is read (a header claiming 2^31 tokens costs nothing).
size_t check_header(const uint8_t* h, uint64_t size, const std::string& name) {
  const int32_t magic = le32(h), version = le32(h + 4), count = le32(h + 8);
  ZT_CHECK_AS(ErrorKind::data, magic == kTokenShardMagic, "[data] ", name,
              ": bad token shard magic at byte offset 0: ", "found ", magic, ", expected ", kTokenShardMagic,
              " (llm.c's .bin format)");
  ZT_CHECK_AS(ErrorKind::data, version == kTokenShardVersion, "[data] ", name, ": unsupported token shard version ",
              version, " at byte offset 4 (this reader knows version ", kTokenShardVersion, ": uint16 tokens)");
  ZT_CHECK_AS(ErrorKind::data, count >= 0, "[data] ", name, ": negative token count ", count, " at byte offset 8");
  const uint64_t expected = kTokenShardHeaderBytes + 2 * uint64_t(count);
  ZT_CHECK_AS(ErrorKind::data, size >= expected, "[data] ", name, ": truncated at byte offset ", size, ": header says ",
              count, " tokens (expected ", expected, " bytes) but file has ", size, " bytes");
  ZT_CHECK_AS(ErrorKind::data, size == expected, "[data] ", name, ": ", size - expected,
              " trailing bytes at byte offset ", expected, ": header says ", count, " tokens (expected ", expected,
              " bytes) but file has ", size, " bytes");
  return size_t(count);
}

void check_has_header(uint64_t size, const std::string& name) {
  ZT_CHECK_AS(ErrorKind::data, size >= kTokenShardHeaderBytes, "[data] ", name, ": truncated at byte offset ", size,
              ": a token shard header needs ", kTokenShardHeaderBytes, " bytes but file has ", size, " bytes");
}

}  // namespace

std::vector<uint16_t> read_token_shard(const std::string& path) {
  detail::InputFile f(path);
  check_has_header(f.size(), path);
  uint8_t header[kTokenShardHeaderBytes];
  f.read_at(header, sizeof header, 0);
  std::vector<uint16_t> tokens(check_header(header, f.size(), path));
  f.read_at(tokens.data(), tokens.size() * sizeof(uint16_t), kTokenShardHeaderBytes);
  return tokens;
}

std::vector<uint16_t> parse_token_shard(const void* data, size_t size, const std::string& name) {
  check_has_header(size, name);
  const uint8_t* b = static_cast<const uint8_t*>(data);
  std::vector<uint16_t> tokens(check_header(b, size, name));
  if (!tokens.empty()) std::memcpy(tokens.data(), b + kTokenShardHeaderBytes, tokens.size() * sizeof(uint16_t));
  return tokens;
}

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  ZT_CHECK_AS(ErrorKind::data, tokens.size() <= size_t(INT32_MAX), "[data] ", path, ": ", tokens.size(),
              " tokens do not fit one shard (its header counts at most ", INT32_MAX, "); split them into several");
  int32_t header[kTokenShardHeaderBytes / sizeof(int32_t)] = {kTokenShardMagic, kTokenShardVersion,
                                                              int32_t(tokens.size())};
  AtomicFile out(path, ErrorKind::data, "[data]");
  out.write(header, sizeof header);
  out.write(tokens.data(), tokens.size() * sizeof(uint16_t));
  out.commit();
  sync_dir(folder_of(path), ErrorKind::data, "[data]");
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

std::vector<uint16_t> read_token_shards(const std::vector<std::string>& paths) {
  std::vector<uint16_t> all;
  for (const std::string& p : paths) {
    const std::vector<uint16_t> t = read_token_shard(p);
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

}  // namespace zt::data
