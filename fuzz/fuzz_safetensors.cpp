// safetensors weights as `zerotrain eval --weights FILE` loads them. Every rejection must be a
// checkpoint error; every tensor accepted lies wholly inside the file's data (ASan checks the
// reads below).
#include <cstdint>
#include <cstdlib>

#include "fuzz_util.h"
#include "zt/ckpt/safetensors.h"
#include "zt/core/error.h"

using namespace zt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("model.safetensors", data, size);
  try {
    const ckpt::LoadedTensors w = ckpt::load_safetensors(path);
    uint8_t sum = 0;
    for (const auto& [name, t] : w.tensors) {
      if (name.empty() || !t.defined() || w.find(name) == nullptr) std::abort();
      const auto* p = static_cast<const uint8_t*>(t.raw_data());
      for (size_t i = 0; i < t.nbytes(); ++i) sum = uint8_t(sum + p[i]);
    }
    volatile uint8_t keep = sum;
    (void)keep;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::checkpoint) std::abort();
  }
  return 0;
}
