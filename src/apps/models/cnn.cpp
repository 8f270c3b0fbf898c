// model.type cnn: 3x3 convolution stages (model.channels), each with ReLU and 2x2 max pooling,
// then fully connected layers (model.fc) (nn::make_cnn).
#include <algorithm>

#include "../session.h"
#include "model_kind.h"
#include "shared.h"
#include "zt/core/error.h"
#include "zt/nn/conv.h"

namespace zt::apps {

std::optional<int64_t> cnn_parameter_count(const CnnKeys& m) {
  // Per stage: a 3x3 convolution with bias; the image halves. Then the MLP over the flat features.
  int64_t params = 0, c = m.in_channels, size = m.image_size, layer = 0;
  for (int64_t out : m.channels) {
    if (__builtin_mul_overflow(c, out, &layer) || __builtin_mul_overflow(layer, int64_t(9), &layer) ||
        __builtin_add_overflow(layer, out, &layer) || __builtin_add_overflow(params, layer, &params))
      return std::nullopt;
    c = out;
    size /= 2;
  }
  MlpKeys head;
  head.hidden = m.fc;
  head.num_classes = m.num_classes;
  if (__builtin_mul_overflow(size, size, &layer) || __builtin_mul_overflow(c, layer, &head.input_dim))
    return std::nullopt;
  const std::optional<int64_t> rest = mlp_parameter_count(head);
  if (!rest || __builtin_add_overflow(params, *rest, &params)) return std::nullopt;
  return params;
}

namespace {

std::shared_ptr<const config::ModelKeys> parse(const config::Section& s) {
  auto m = std::make_shared<CnnKeys>();
  s.read_int_list("channels", m->channels, 1);
  s.read_int_list("fc", m->fc, 1);
  s.read_int("image_size", m->image_size, 1);
  s.read_int("in_channels", m->in_channels, 1);
  s.read_int("num_classes", m->num_classes, 2);
  return m;
}

// The stages against the image, its size, and the input against the images the data gives.
void check(const config::Config& c, const std::string& source) {
  const CnnKeys& m = c.model.as<CnnKeys>();
  ZT_CHECK_AS(ErrorKind::config, !m.channels.empty(), "[config] ", source,
              ": 'model.channels' must name at least one convolution stage, got []");
  // Each stage halves the image (2x2 pooling, rounding down); the last must keep a pixel.
  ZT_CHECK_AS(ErrorKind::config, m.channels.size() < 63 && (m.image_size >> m.channels.size()) >= 1, "[config] ",
              source, ": 'model.image_size' ", m.image_size, " is too small for ", m.channels.size(),
              " convolution stages (each halves it; needs >= ", m.channels.size() < 63 ? 1LL << m.channels.size() : 0,
              ")");
  check_parameter_count(cnn_parameter_count(m), source,
                        "model.in_channels " + std::to_string(m.in_channels) + ", model.image_size " +
                            std::to_string(m.image_size) + ", model.channels " +
                            config::detail::short_dump(m.channels) + ", model.fc " + config::detail::short_dump(m.fc) +
                            " and model.num_classes " + std::to_string(m.num_classes));
  const config::ImageShape img = config::dataset_image_shape(c.data.dataset);
  const int64_t size = c.data.pad_to > 0 ? c.data.pad_to : img.size;
  ZT_CHECK_AS(ErrorKind::config, m.in_channels == img.channels && m.image_size == size, "[config] ", source,
              ": model.in_channels ", m.in_channels, " and model.image_size ", m.image_size,
              " do not match the data: ", c.data.dataset, " gives ", img.channels, " x ", size, " x ", size, " images",
              c.data.pad_to > 0 ? " (data.pad_to " + std::to_string(c.data.pad_to) + ")" : std::string(),
              "; set model.in_channels ", img.channels, " and model.image_size ", size);
}

// Each 3x3 convolution's weights act at every position of its stage's image: 6 FLOPs per
// multiply-add beyond the one use 6 N counts (Note [step cost]).
int64_t conv_extra_flops(const config::Config& c) {
  const CnnKeys& m = c.model.as<CnnKeys>();
  double extra = 0;
  int64_t in = m.in_channels, size = m.image_size;
  for (int64_t out : m.channels) {
    extra += 6.0 * 9.0 * double(in) * double(out) * (double(size) * double(size) - 1);
    in = out;
    size /= 2;
  }
  return int64_t(std::min(extra, 9.2e18));
}

ModelKind cnn() {
  ModelKind k = image_model(
      "cnn", {.keys = {"channels", "fc", "image_size", "in_channels", "num_classes"}, .parse = parse, .check = check},
      [](const config::Config& c, bool deferred) {
        const CnnKeys& m = c.model.as<CnnKeys>();
        // parse() checked that the count and its fp32 bytes fit in int64.
        return build_within_memory(cnn_parameter_count(m).value_or(0), deferred, [&] {
          return std::shared_ptr<nn::Module>(
              nn::make_cnn(m.in_channels, m.image_size, m.channels, m.fc, m.num_classes, c.seed));
        });
      },
      [](const config::Config& c) { return ModelShape{.num_classes = c.model.as<CnnKeys>().num_classes}; },
      [](const config::Config& c) {
        const CnnKeys& m = c.model.as<CnnKeys>();
        return m.in_channels * m.image_size * m.image_size;
      },
      " (model.in_channels x model.image_size^2)");
  k.extra_flops_per_row = conv_extra_flops;
  return k;
}

}  // namespace

extern const ModelKind kCnn = cnn();

}  // namespace zt::apps
