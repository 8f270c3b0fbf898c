// MNIST / Fashion-MNIST loading, normalisation and deterministic per-epoch sample order.
#include "zt/data/mnist.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "idx_reader.h"
#include "split_size.h"
#include "zt/core/allocator.h"
#include "zt/core/parallel.h"
#include "zt/core/random.h"
#include "zt/core/splitmix.h"

namespace zt::data {
namespace {

constexpr int64_t kNumClasses = 10;  // MNIST and Fashion-MNIST both have 10 classes

}  // namespace

Dataset load_mnist(const std::string& dir, const std::string& split, float mean, float stddev, int64_t limit) {
  ZT_CHECK(split == "train" || split == "test", "[data] unknown split '", split, "' (allowed: train, test)");
  ZT_CHECK(stddev > 0.0f, "[data] normalisation stddev must be > 0, got ", stddev);
  ZT_CHECK(limit >= 0, "[data] limit must be >= 0, got ", limit);
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::string img_path = (std::filesystem::path(dir) / (prefix + "-images-idx3-ubyte")).string();
  const std::string lbl_path = (std::filesystem::path(dir) / (prefix + "-labels-idx1-ubyte")).string();

  // Both headers first: nothing is decoded for a pair of files that cannot make a data set.
  detail::IdxReader img_file = detail::IdxReader::open(img_path);
  detail::IdxReader lbl_file = detail::IdxReader::open(lbl_path);
  const std::vector<int64_t>& idims = img_file.dims();
  const std::vector<int64_t>& ldims = lbl_file.dims();
  ZT_CHECK_AS(ErrorKind::data, idims.size() == 3, "[data] ", img_file.name(),
              ": expected an images file (3 dims), got ", idims.size(), " dim(s)");
  ZT_CHECK_AS(ErrorKind::data, ldims.size() == 1, "[data] ", lbl_file.name(), ": expected a labels file (1 dim), got ",
              ldims.size(), " dims");
  ZT_CHECK_AS(ErrorKind::data, idims[0] == ldims[0], "[data] ", img_file.name(), " has ", idims[0], " images but ",
              lbl_file.name(), " has ", ldims[0], " labels");
  ZT_CHECK_AS(ErrorKind::data, idims[0] > 0, "[data] the ", split, " split in ", dir, " has no samples (",
              lbl_file.name(), " and ", img_file.name(), " say 0 items)");

  const int64_t n = limit > 0 ? std::min(limit, idims[0]) : idims[0];
  const int64_t features = idims[1] * idims[2];  // < 2^64 / n: the header's product is checked
  const detail::SplitSize need{split, dir, n, features};
  need.check_budget();
  // The payloads before the tensors: nothing is allocated for what a header merely claims.
  IdxArray img = img_file.read();
  IdxArray lbl = lbl_file.read();
  Dataset ds = need.allocate();

  std::array<float, 256> lut;
  for (int v = 0; v < 256; ++v) lut[size_t(v)] = (float(v) / 255.0f - mean) / stddev;
  const uint8_t* src = img.bytes.data();
  float* dst = ds.images.data<float>();
  parallel_for(n * features, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = lut[src[i]];
  });

  int32_t* y = ds.labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = lbl.bytes[size_t(i)];
    ZT_CHECK_AS(ErrorKind::data, v < kNumClasses, "[data] ", lbl_file.name(), ": label ", v, " of sample ", i,
                " (byte offset ", 8 + i, ") is outside 0..", kNumClasses - 1);
    y[i] = int32_t(v);
  }
  return ds;
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch, bool shuffle) {
  ZT_CHECK(n >= 0, "[data] epoch_order: n must be >= 0, got ", n);
  if (!shuffle) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t(0));
    return order;
  }
  Generator gen(mix64(seed ^ (uint64_t(epoch) * kSplitmixGolden)));  // unrelated seeds for nearby epochs
  return gen.permutation(n);
}

Batch gather_batch(const Dataset& ds, const std::vector<int64_t>& indices, int64_t begin, int64_t end) {
  ZT_CHECK(ds.images.defined() && ds.labels.defined(), "[data] gather_batch: empty dataset");
  ZT_CHECK(0 <= begin && begin <= end && end <= int64_t(indices.size()), "[data] gather_batch: range [", begin, ", ",
           end, ") is outside the ", indices.size(), " indices");
  ZT_CHECK(ds.images.dim() == 2 && ds.images.dtype() == DType::f32 && ds.images.is_contiguous(),
           "[data] gather_batch: images must be contiguous f32 [n, features], got ", shape_str(ds.images.shape()));
  const int64_t b = end - begin, features = ds.images.size(1), n = ds.size();
  Batch out;
  out.x = Tensor::empty({b, features}, DType::f32);
  out.y = Tensor::empty({b}, DType::i32);
  const float* src = ds.images.data<float>();
  const int32_t* lbl = ds.labels.data<int32_t>();
  float* x = out.x.data<float>();
  int32_t* y = out.y.data<int32_t>();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t k = indices[size_t(begin + i)];
    ZT_CHECK(0 <= k && k < n, "[data] gather_batch: index ", k, " at position ", begin + i,
             " is outside the dataset of ", n, " samples");
    std::memcpy(x + i * features, src + k * features, size_t(features) * sizeof(float));
    y[i] = lbl[k];
  }
  return out;
}

}  // namespace zt::data
