// IDX files (MNIST's format) as read_idx reads them from disk, uncompressed. Every rejection
// must be a data error; what is accepted holds exactly the bytes its header promises.
#include <cstdint>
#include <cstdlib>

#include "fuzz_util.h"
#include "idx_check.h"
#include "zt/core/error.h"
#include "zt/data/mnist.h"

using namespace zt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("images-idx3-ubyte", data, size);
  fuzz::check_idx_file(path);
  return 0;
}
