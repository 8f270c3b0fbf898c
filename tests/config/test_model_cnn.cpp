// The CNN's model keys (type cnn: channels, fc, image_size, in_channels), the data keys it needs
// (dataset cifar10, pad_to), their checks against each other, and configs/cnn_fashion.json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/model_kind.h"
#include "models/shared.h"
#include "zt/config/config.h"
#include "zt/core/error.h"

namespace zt::config {
namespace {

// Note [model registry]: the model section's keys are the families' (apps' entries); every test of
// this binary parses with the shipped families registered, as the zerotrain binary does.
class ShippedFamilies : public ::testing::Environment {
 public:
  void SetUp() override { apps::register_model_types(); }
};
[[maybe_unused]] ::testing::Environment* const kFamilies = ::testing::AddGlobalTestEnvironment(new ShippedFamilies);

using ::testing::HasSubstr;
using json = nlohmann::json;

const apps::CnnKeys& keys_of(const Config& c) { return c.model.as<apps::CnnKeys>(); }

std::string error_of(const json& j) {
  try {
    parse(j, "cfg.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::config) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected zt::Error for " << j.dump();
  return "";
}

// A CNN on Fashion-MNIST padded to 32x32 with `model` keys merged in.
json cnn(json model = json::object(), json data = json::object()) {
  json m = {{"type", "cnn"}};
  json d = {{"dataset", "fashion-mnist"}, {"pad_to", 32}};
  m.update(model);
  d.update(data);
  return {{"model", m}, {"data", d}};
}

TEST(ConfigCnn, KeysParseWithTheSeedsDefaults) {
  Config c = parse(cnn());
  EXPECT_EQ(c.model.type, "cnn");
  EXPECT_EQ(keys_of(c).channels, (std::vector<int64_t>{64, 128, 256}));
  EXPECT_EQ(keys_of(c).fc, (std::vector<int64_t>{1024}));
  EXPECT_EQ(keys_of(c).image_size, 32);
  EXPECT_EQ(keys_of(c).in_channels, 1);
  EXPECT_EQ(c.data.pad_to, 32);
  EXPECT_EQ(keys_of(c).in_channels * keys_of(c).image_size * keys_of(c).image_size, 1024);
  // 640 + 73856 + 295168 (convolutions) + 4195328 + 10250 (4096 -> 1024 -> 10).
  EXPECT_EQ(apps::cnn_parameter_count(keys_of(c)), 4575242);
  c = parse(cnn({{"channels", {8}}, {"fc", json::array()}, {"image_size", 28}}, {{"pad_to", 0}}));
  EXPECT_EQ(keys_of(c).fc, std::vector<int64_t>{});
  EXPECT_EQ(apps::cnn_parameter_count(keys_of(c)), 8 * 9 + 8 + 8 * 14 * 14 * 10 + 10);
}

TEST(ConfigCnn, Cifar10IsADatasetWithItsOwnFolderAndShape) {
  Config c = parse(cnn({{"in_channels", 3}}, {{"dataset", "cifar10"}, {"pad_to", 0}}));
  EXPECT_EQ(c.data.dataset, "cifar10");
  EXPECT_EQ(c.data.dir, "data/cifar10");
  EXPECT_EQ(dataset_image_shape("cifar10").channels, 3);
  EXPECT_EQ(dataset_image_shape("cifar10").size, 32);
  EXPECT_EQ(keys_of(c).in_channels * keys_of(c).image_size * keys_of(c).image_size, 3072);
}

TEST(ConfigCnn, BadValuesNameTheKey) {
  EXPECT_THAT(error_of(cnn({{"type", "resnet"}})), HasSubstr("'model.type' must be one of mlp, cnn"));
  EXPECT_THAT(error_of(cnn({{"channel", {8}}})),
              HasSubstr("unknown key 'model.channel' (did you mean 'model.channels'?)"));
  EXPECT_THAT(error_of(cnn({{"channels", {8, 0}}})),
              HasSubstr("'model.channels' must be a list of positive integers, got [8,0]"));
  EXPECT_THAT(error_of(cnn({{"channels", json::array()}})), HasSubstr("'model.channels' must name at least one"));
  EXPECT_THAT(error_of(cnn({{"fc", "1024"}})), HasSubstr("'model.fc' must be a list of positive integers"));
  EXPECT_THAT(error_of(cnn({{"image_size", 0}})), HasSubstr("'model.image_size' must be a positive integer"));
  EXPECT_THAT(error_of(cnn({{"in_channels", -1}})), HasSubstr("'model.in_channels' must be a positive integer"));
  EXPECT_THAT(error_of(cnn(json::object(), {{"pad_to", -2}})),
              HasSubstr("'data.pad_to' must be an integer in 0..1048576, got -2"));
}

TEST(ConfigCnn, TheImageMustSurviveThePoolingStages) {
  // 32 -> 16 -> 8 -> 4 -> 2 -> 1: five stages fit, six do not.
  EXPECT_NO_THROW(parse(cnn({{"channels", {4, 4, 4, 4, 4}}})));
  EXPECT_THAT(error_of(cnn({{"channels", {4, 4, 4, 4, 4, 4}}})),
              HasSubstr("'model.image_size' 32 is too small for 6 convolution stages (each halves it; needs >= 64)"));
  EXPECT_THAT(error_of(cnn({{"channels", std::vector<int64_t>(70, 1)}})), HasSubstr("too small for 70"));
}

TEST(ConfigCnn, TheModelMustTakeTheImagesTheDataGives) {
  EXPECT_THAT(error_of(cnn(json::object(), {{"pad_to", 0}})),
              HasSubstr("model.in_channels 1 and model.image_size 32 do not match the data: fashion-mnist gives 1 x "
                        "28 x 28 images; set model.in_channels 1 and model.image_size 28"));
  EXPECT_THAT(error_of(cnn({{"image_size", 28}})), HasSubstr("gives 1 x 32 x 32 images (data.pad_to 32)"));
  EXPECT_THAT(error_of(cnn(json::object(), {{"dataset", "cifar10"}, {"pad_to", 0}})),
              HasSubstr("cifar10 gives 3 x 32 x 32"));
  EXPECT_THAT(error_of(cnn(json::object(), {{"pad_to", 20}})),
              HasSubstr("'data.pad_to' 20 is smaller than fashion-mnist's 28x28 images"));
  EXPECT_NO_THROW(parse(cnn({{"image_size", 40}}, {{"pad_to", 40}})));
  // An MLP reads flat rows: pad_to only changes how many (checked when the data is loaded).
  EXPECT_NO_THROW(parse(json{{"data", {{"pad_to", 32}}}, {"model", {{"input_dim", 1024}}}}));
}

TEST(ConfigCnn, ParameterCountsThatOverflowAreRefused) {
  EXPECT_THAT(error_of(cnn({{"channels", {int64_t(1) << 40, int64_t(1) << 40}}})),
              HasSubstr("give more parameters than 64-bit sizes can count"));
  EXPECT_THAT(error_of(cnn({{"fc", {int64_t(1) << 62}}})), HasSubstr("model.fc"));
  EXPECT_THAT(error_of(cnn({{"image_size", int64_t(1) << 40}})), HasSubstr("model.image_size 1099511627776"));
  EXPECT_THAT(error_of(cnn({{"channels", {int64_t(1) << 61}}})), HasSubstr("64-bit sizes"));  // 9 * 2^61
}

TEST(ConfigCnn, TheShippedConfigLoads) {
  Config c = load(std::string(ZT_SOURCE_DIR) + "/configs/cnn_fashion.json");
  EXPECT_EQ(c.model.type, "cnn");
  EXPECT_EQ(c.zero.stage, 2);
  EXPECT_EQ(c.data.dataset, "fashion-mnist");
  EXPECT_EQ(c.data.pad_to, 32);
  EXPECT_EQ(c.run.dir, "runs/cnn_fashion");
}

}  // namespace
}  // namespace zt::config
