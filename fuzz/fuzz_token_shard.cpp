// Token shards (llm.c .bin) as training reads them from disk. Every rejection must be a data
// error, the file and memory readers must agree, and an accepted shard holds exactly the tokens
// its header counts.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fuzz_util.h"
#include "zt/core/error.h"
#include "zt/data/token_shard.h"

using namespace zt;

namespace {

// The tokens, or the error's message; a rejection of any other kind aborts.
std::pair<std::vector<uint16_t>, std::string> outcome(auto&& read) {
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
  if (file.second.empty()) {
    int32_t count = 0;
    std::memcpy(&count, data + 8, 4);
    if (size != data::kTokenShardHeaderBytes + 2 * file.first.size() || size_t(count) != file.first.size())
      std::abort();
    if (!file.first.empty() && std::memcmp(file.first.data(), data + data::kTokenShardHeaderBytes, 2 * size_t(count)))
      std::abort();
  }
  return 0;
}
