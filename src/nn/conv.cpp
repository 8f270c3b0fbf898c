// Conv2d, MaxPool2d, Flatten and the CNN model (zt/nn/conv.h).
#include "zt/nn/conv.h"

#include <cmath>
#include <string>

#include "zt/autograd/functions.h"
#include "zt/autograd/layers.h"

namespace zt::nn {

Conv2d::Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool has_bias,
               Generator& gen)
    : stride_(stride), padding_(padding) {
  ZT_CHECK(in > 0 && out > 0 && kernel > 0, "[Conv2d] sizes must be positive, got in=", in, " out=", out,
           " kernel=", kernel);
  ZT_CHECK(stride > 0 && padding >= 0, "[Conv2d] stride must be >= 1 and padding >= 0, got stride=", stride,
           " padding=", padding);
  int64_t fan_in = 0, n = 0;
  ZT_CHECK(!__builtin_mul_overflow(in, kernel * kernel, &fan_in) && !__builtin_mul_overflow(fan_in, out, &n),
           "[Conv2d] in=", in, " out=", out, " kernel=", kernel, " overflows int64");
  const float bound = 1.f / std::sqrt(float(fan_in));
  weight = register_parameter("weight", {out, in, kernel, kernel}, uniform_init(gen, bound));
  if (has_bias) bias = register_parameter("bias", {out}, uniform_init(gen, bound));
}

Tensor Conv2d::forward(const Tensor& x) {
  return ag::conv2d(x, weight, bias.defined() ? &bias : nullptr, stride_, padding_);
}

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride) : kernel_(kernel), stride_(stride == 0 ? kernel : stride) {
  ZT_CHECK(kernel > 0 && stride >= 0, "[MaxPool2d] kernel must be >= 1 and stride >= 0, got kernel=", kernel,
           " stride=", stride);
}

Tensor MaxPool2d::forward(const Tensor& x) { return ag::max_pool2d(x, kernel_, stride_); }

Tensor Flatten::forward(const Tensor& x) {
  ZT_CHECK(x.dim() >= 2, "[Flatten] needs [B, ...] with at least 2 dimensions, got ", shape_str(x.shape()));
  return ag::reshape(x, {x.size(0), shape_numel(Shape(x.shape().begin() + 1, x.shape().end()))});
}

Cnn::Cnn(int64_t in_channels, int64_t image_size, const std::vector<int64_t>& channels, const std::vector<int64_t>& fc,
         int64_t classes, Generator& gen)
    : in_channels_(in_channels), image_size_(image_size) {
  ZT_CHECK(in_channels > 0 && image_size > 0 && classes > 0 && !channels.empty(),
           "[Cnn] in_channels, image_size and classes must be >= 1 and channels non-empty, got in_channels=",
           in_channels, " image_size=", image_size, " classes=", classes, " and ", channels.size(), " channel entries");
  features_ = std::make_shared<Sequential>();
  int64_t c = in_channels, size = image_size;
  for (int64_t out : channels) {
    ZT_CHECK(size >= 2, "[Cnn] a ", image_size, "x", image_size, " image is too small for ", channels.size(),
             " 2x2 pooling stages");
    features_->add(std::make_shared<Conv2d>(c, out, 3, 1, 1, true, gen));
    features_->add(std::make_shared<Activation>("relu"));
    features_->add(std::make_shared<MaxPool2d>(2));
    c = out;
    size /= 2;
  }
  int64_t prev = 0;
  ZT_CHECK(!__builtin_mul_overflow(c, size * size, &prev), "[Cnn] ", c, " channels of ", size, "x", size,
           " overflow int64");
  classifier_ = std::make_shared<Sequential>();
  for (int64_t h : fc) {
    classifier_->add(std::make_shared<Linear>(prev, h, true, gen));
    classifier_->add(std::make_shared<Activation>("relu"));
    prev = h;
  }
  classifier_->add(std::make_shared<Linear>(prev, classes, true, gen));
  register_module("features", features_);
  register_module("classifier", classifier_);
}

Tensor Cnn::forward(const Tensor& x) {
  const int64_t per_sample = in_channels_ * image_size_ * image_size_;
  const bool rows = x.dim() == 2 && x.size(1) == per_sample;
  const bool images = x.dim() == 4 && x.size(1) == in_channels_ && x.size(2) == image_size_ && x.size(3) == image_size_;
  ZT_CHECK(rows || images, "[Cnn] input ", shape_str(x.shape()), " is neither [B, ", per_sample, "] nor [B, ",
           in_channels_, ", ", image_size_, ", ", image_size_, "] (in_channels x image_size x image_size)");
  Tensor h = rows ? ag::reshape(x, {x.size(0), in_channels_, image_size_, image_size_}) : x;
  h = (*features_)(h);
  return (*classifier_)(flatten_(h));
}

std::shared_ptr<Module> make_cnn(int64_t in_channels, int64_t image_size, const std::vector<int64_t>& channels,
                                 const std::vector<int64_t>& fc, int64_t classes, uint64_t seed) {
  Generator gen(seed);
  TagScope tag(MemTag::param);
  return std::make_shared<Cnn>(in_channels, image_size, channels, fc, classes, gen);
}

}  // namespace zt::nn
