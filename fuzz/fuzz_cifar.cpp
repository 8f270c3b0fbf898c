// CIFAR-10 binary batches as load_cifar10 reads them from disk (the input is test_batch.bin).
// Every rejection must be a data error; what is accepted is one sample per 3073 bytes, with
// labels 0..9 and finite pixels.
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "fuzz_util.h"
#include "zt/core/error.h"
#include "zt/data/cifar.h"

using namespace zt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::write_scratch("test_batch.bin", data, size);
  try {
    const data::Dataset ds = data::load_cifar10(fuzz::scratch_dir(), "test");
    if (size % data::kCifarRecordBytes != 0 || ds.size() != int64_t(size / data::kCifarRecordBytes)) std::abort();
    if (ds.images.numel() != ds.size() * data::kCifarImageBytes) std::abort();
    const int32_t* y = ds.labels.data<int32_t>();
    for (int64_t i = 0; i < ds.size(); ++i)
      if (y[i] < 0 || y[i] > 9 || y[i] != data[i * data::kCifarRecordBytes]) std::abort();
    const float* x = ds.images.data<float>();
    for (int64_t i = 0; i < ds.images.numel(); ++i)
      if (!std::isfinite(x[i])) std::abort();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::data) std::abort();
  }
  return 0;
}
