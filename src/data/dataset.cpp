// What every image loader shares: the split's memory against the budget (split_size.h), and
// padding images to a larger size (zt/data/mnist.h).
#include <algorithm>

#include "split_size.h"
#include "zt/core/allocator.h"
#include "zt/core/parallel.h"

namespace zt::data {
namespace detail {

size_t SplitSize::bytes() const {
  size_t image_bytes = 0;
  if (__builtin_mul_overflow(size_t(n) * size_t(features), sizeof(float), &image_bytes) ||
      image_bytes > SIZE_MAX - size_t(n) * sizeof(int32_t))
    return SIZE_MAX;  // saturated: too much either way
  return image_bytes + size_t(n) * sizeof(int32_t);
}

void SplitSize::too_big(const std::string& detail) const {
  const size_t budget = Allocator::global().budget();
  ZT_THROW_AS(ErrorKind::out_of_memory, "[data] the ", split, " split in ", dir, " (", n, " samples of ", features,
              " features) needs ", format_bytes(bytes()), " as f32 images and i32 labels, more than ",
              budget ? "the memory budget of " + format_bytes(budget) + " leaves" : std::string("can be allocated"),
              " (", detail, "); ", budget ? "raise the budget or " : "", "load fewer samples (data.", split, "_limit)");
}

void SplitSize::check_budget() const {
  const MemStats before = Allocator::global().stats();
  if (const size_t budget = Allocator::global().budget(); budget > 0 && before.total_current + bytes() > budget)
    too_big("in use: " + format_bytes(before.total_current));
}

Dataset SplitSize::allocate() const {
  Dataset ds;
  try {
    ds.images = Tensor::empty({n, features}, DType::f32, MemTag::workspace);
    ds.labels = Tensor::empty({n}, DType::i32, MemTag::workspace);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::out_of_memory) throw;
    too_big(e.what());
  }
  return ds;
}

}  // namespace detail

Dataset pad_images(const Dataset& ds, int64_t channels, int64_t size, int64_t to, const std::vector<float>& fill) {
  ZT_CHECK(channels >= 1 && size >= 1 && to >= size, "[data] pad_images: need channels >= 1 and 1 <= size <= to, got ",
           channels, " channels, size ", size, ", to ", to);
  ZT_CHECK(int64_t(fill.size()) == channels, "[data] pad_images: ", fill.size(), " fill values for ", channels,
           " channels");
  ZT_CHECK(ds.images.defined() && ds.images.dim() == 2 && ds.images.dtype() == DType::f32 &&
               ds.images.is_contiguous() && ds.images.size(1) == channels * size * size,
           "[data] pad_images: images must be contiguous f32 [n, ", channels * size * size, "] (", channels, " x ",
           size, " x ", size, "), got ", ds.images.defined() ? shape_str(ds.images.shape()) : std::string("none"));
  const int64_t n = ds.size(), before = (to - size) / 2, in = size * size, out = to * to;
  Dataset r;
  r.labels = ds.labels;
  r.images = Tensor::empty({n, channels * out}, DType::f32, MemTag::workspace);
  const float* src = ds.images.data<float>();
  float* dst = r.images.data<float>();
  parallel_for(n * channels, 64, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {  // one [size, size] plane into one [to, to] plane
      float* d = dst + p * out;
      std::fill(d, d + out, fill[size_t(p % channels)]);
      for (int64_t y = 0; y < size; ++y)
        std::copy(src + p * in + y * size, src + p * in + (y + 1) * size, d + (before + y) * to + before);
    }
  });
  return r;
}

}  // namespace zt::data
