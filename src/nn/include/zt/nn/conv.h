#pragma once
// Convolutional layers and the CNN model. Layouts are NCHW; initialisation is torch's default.
#include <cstdint>
#include <memory>
#include <vector>

#include "zt/core/random.h"
#include "zt/nn/module.h"

namespace zt::nn {

// torch.nn.Conv2d with square kernel, stride and padding: weight [out, in, k, k] and bias [out],
// both ~ U(-1/sqrt(in*k*k), 1/sqrt(in*k*k)). May defer (Note [deferred init]).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias,
         Generator& gen);
  const char* type_name() const override { return "Conv2d"; }
  Tensor weight, bias;

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  int64_t stride_, padding_;
};

// torch.nn.MaxPool2d(kernel, stride) without padding; stride 0 means the kernel size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0);
  const char* type_name() const override { return "MaxPool2d"; }

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  int64_t kernel_, stride_;
};

// torch.nn.Flatten(): [B, ...] -> [B, product of the rest].
class Flatten : public Module {
 public:
  const char* type_name() const override { return "Flatten"; }

 protected:
  Tensor forward(const Tensor& x) override;
};

// The CNN of the seed, torchvision's shape: `features` = per entry of channels, Conv2d(3x3,
// padding 1) + ReLU + MaxPool2d(2); flatten; `classifier` = Linear + ReLU per entry of fc, then
// Linear to classes. Parameters are named as torchvision's VGG names them: features.0.weight,
// features.3.weight, ..., classifier.0.weight, classifier.2.weight, ... Input: [B, C*S*S] rows as
// data::gather_batch gives them, or [B, C, S, S].
class Cnn : public Module {
 public:
  Cnn(int64_t in_channels, int64_t image_size, const std::vector<int64_t>& channels, const std::vector<int64_t>& fc,
      int64_t classes, Generator& gen);
  const char* type_name() const override { return "Cnn"; }

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  int64_t in_channels_, image_size_;
  std::shared_ptr<Sequential> features_, classifier_;
  Flatten flatten_;
};

// Throws (invalid_argument) for sizes that cannot make that CNN: sizes < 1, or an image that the
// pooling stages shrink below one pixel.
std::shared_ptr<Module> make_cnn(int64_t in_channels, int64_t image_size, const std::vector<int64_t>& channels,
                                 const std::vector<int64_t>& fc, int64_t classes, uint64_t seed);

}  // namespace zt::nn
