// A checkpoint's metadata.json as `zerotrain train run.resume=...`, `export` and `ckpt` read it.
// Every rejection must be a checkpoint error; an accepted file is consistent enough for the
// loader's arithmetic (each parameter in exactly one buffer, sizes that add up).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "zt/ckpt/metadata.h"
#include "zt/core/error.h"

using namespace zt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json m =
        ckpt::parse_metadata(std::string(reinterpret_cast<const char*>(data), size), "metadata.json");
    if (m["shards"].size() != m["world_size"].get<size_t>()) std::abort();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::checkpoint) std::abort();
  }
  return 0;
}
