// IDX files (MNIST's format) as read_idx reads them from disk, uncompressed. Every rejection
// must be a data error; what is accepted holds exactly the bytes its header promises.
#include <cstdint>
#include <cstdlib>

#include "fuzz_util.h"
#include "zt/core/error.h"
#include "zt/data/mnist.h"

using namespace zt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("images-idx3-ubyte", data, size);
  try {
    const data::IdxArray a = data::read_idx(path);
    int64_t items = 1;
    for (int64_t d : a.dims)
      if (d < 0 || __builtin_mul_overflow(items, d, &items)) std::abort();
    if (a.dims.empty() || uint64_t(items) != a.bytes.size()) std::abort();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::data) std::abort();
  }
  return 0;
}
