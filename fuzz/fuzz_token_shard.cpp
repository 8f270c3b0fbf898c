// Token shards (llm.c .bin, versions 1 and 2) as training reads them from disk. Every rejection
// must be a data error, the file, memory and mapped readers must agree, and an accepted shard
// holds exactly the tokens its header counts, at its version's width.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fuzz_util.h"
#include "zt/core/error.h"
#include "zt/data/token_shard.h"
#include "zt/data/token_stream.h"

using namespace zt;

namespace {

// The tokens, or the error's message; a rejection of any other kind aborts.
template <typename Read>
auto outcome(Read&& read) -> std::pair<decltype(read()), std::string> {
  try {
    return {read(), ""};
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::data) std::abort();
    return {{}, e.what()};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("shard.bin", data, size);
  const auto file = outcome([&] { return data::read_token_shard(path); });
  const auto mem = outcome([&] { return data::parse_token_shard(data, size, path); });
  if (file != mem) std::abort();
  const auto file32 = outcome([&] { return data::read_token_shard32(path); });
  const auto mem32 = outcome([&] { return data::parse_token_shard32(data, size, path); });
  if (file32 != mem32) std::abort();
  const auto mapped = outcome([&] {
    const data::TokenStream s = data::TokenStream::map_files({path});
    std::vector<int32_t> t(size_t(s.size()));
    s.copy(0, s.size(), t.data());
    return std::vector<uint32_t>(t.begin(), t.end());
  });
  if (mapped != file32) std::abort();
  // The uint16 reader accepts exactly the version 1 shards the others accept, with the same tokens.
  if (file.second.empty() &&
      (!file32.second.empty() || file32.first != std::vector<uint32_t>(file.first.begin(), file.first.end())))
    std::abort();
  if (file32.second.empty()) {
    int32_t version = 0, count = 0;
    std::memcpy(&version, data + 4, 4);
    std::memcpy(&count, data + 8, 4);
    const size_t width = version == data::kTokenShardVersion32 ? 4 : 2;
    if (size != data::kTokenShardHeaderBytes + width * file32.first.size() || size_t(count) != file32.first.size())
      std::abort();
    for (size_t i = 0; i < file32.first.size(); ++i) {
      uint32_t t = 0;
      std::memcpy(&t, data + data::kTokenShardHeaderBytes + width * i, width);
      if (t != file32.first[i]) std::abort();
    }
    if (file.second.empty() != (version == data::kTokenShardVersion)) std::abort();
  }
  return 0;
}
