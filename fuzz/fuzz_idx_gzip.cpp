// Gzipped IDX files. The first input byte picks what the rest is: even, an IDX file that the
// target gzips (the parser sees valid streams with hostile headers); odd, the .gz bytes as they
// are (corrupt streams, bombs). Every rejection must be a data error.
#include <zlib.h>

#include <cstdint>
#include <cstdlib>

#include "fuzz_util.h"
#include "idx_check.h"
#include "zt/core/error.h"
#include "zt/data/mnist.h"

using namespace zt;

namespace {
std::string gzip_to_scratch(const uint8_t* data, size_t size) {
  const std::string path = fuzz::scratch_dir() + "/labels-idx1-ubyte.gz";
  gzFile f = gzopen(path.c_str(), "wb1");
  if (!f || (size && gzwrite(f, data, unsigned(size)) != int(size)) || gzclose(f) != Z_OK) std::abort();
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string path = data[0] % 2 == 0 ? gzip_to_scratch(data + 1, size - 1)
                                            : fuzz::write_scratch("labels-idx1-ubyte.gz", data + 1, size - 1);
  fuzz::check_idx_file(path);
  return 0;
}
