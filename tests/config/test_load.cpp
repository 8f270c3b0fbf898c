// load(): files, JSON errors with offsets, key=value overrides; resolve_batch's DeepSpeed rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include "common/error_of.h"
#include "common/temp_dir.h"

#include <filesystem>
#include <fstream>

#include "models/shared.h"
#include "zt/config/config.h"
#include "zt/core/error.h"

namespace zt::config {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

using zt::testing_util::error_of;

class ConfigFile : public zt::testing_util::TempDirTest {};

TEST_F(ConfigFile, LoadsAndValidates) {
  auto p = write("ds.json", R"({"train_batch_size": 32, "zero_optimization": {"stage": 2}})");
  Config c = load(p);
  EXPECT_EQ(c.train_batch_size, 32);
  EXPECT_EQ(c.zero.stage, 2);
  auto bad = write("bad.json", R"({"zero_optimization": {"stage": 7}})");
  EXPECT_THAT(error_of([&] { load(bad); }), HasSubstr("[config] " + bad + ": 'zero_optimization.stage' must be"));
}

TEST_F(ConfigFile, MissingFileNamesPath) {
  std::string p = (dir_ / "nope.json").string();
  EXPECT_THAT(error_of([&] { load(p); }), HasSubstr("[config] " + p + ": cannot open config file (No such file"));
}

TEST_F(ConfigFile, MalformedJsonNamesOffsetLineAndColumn) {
  // The stray '}' on line 3 is at byte offset 30.
  auto p = write("broken.json", "{\n  \"train_batch_size\": 32,\n  }\n");
  std::string msg = error_of([&] { load(p); });
  EXPECT_THAT(msg, HasSubstr("[config] " + p + ": invalid JSON at byte offset 30 (line 3, column 3)"));
  EXPECT_THAT(msg, HasSubstr("unexpected '}'"));
  auto empty = write("empty.json", "");
  EXPECT_THAT(error_of([&] { load(empty); }), HasSubstr("invalid JSON at byte offset 0 (line 1, column 1)"));
  auto arr = write("arr.json", "[1, 2]");
  EXPECT_THAT(error_of([&] { load(arr); }), HasSubstr("the top level must be a JSON object, got [1,2]"));
}

TEST_F(ConfigFile, OverridesApplyBeforeValidation) {
  auto p = write("ds.json", R"({"optimizer": {"type": "AdamW", "params": {"lr": 0.001}}, "run": {"dir": "a"}})");
  Config c = load(p, {"optimizer.params.lr=3e-4", "zero_optimization.stage=3", "bf16.enabled=true",
                      "model.activation=gelu", "model.hidden=[32,16]", "run.dir=runs/b c", "seed=7"});
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 3e-4);
  EXPECT_EQ(c.zero.stage, 3);             // a new section
  EXPECT_TRUE(c.bf16);                    // a boolean
  EXPECT_EQ(c.model.as<apps::MlpKeys>().activation, "gelu");  // not JSON, so a string
  EXPECT_EQ(c.model.as<apps::MlpKeys>().hidden, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(c.run.dir, "runs/b c");
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.raw["optimizer"]["params"]["lr"], 3e-4);  // raw holds the overridden JSON
  EXPECT_EQ(c.raw["zero_optimization"]["stage"], 3);
  // An unknown override key is validated like a key in the file.
  EXPECT_THAT(error_of([&] { load(p, {"zero_optimization.stgae=1"}); }),
              HasSubstr(p + " (with overrides): unknown key 'zero_optimization.stgae' (did you mean "
                            "'zero_optimization.stage'?)"));
  EXPECT_THAT(error_of([&] { load(p, {"train_batch_size=abc"}); }),
              HasSubstr("'train_batch_size' must be a positive integer, got \"abc\""));
}

TEST(ConfigOverrides, Syntax) {
  json j = {{"a", {{"b", 1}}}, {"n", 5}};
  apply_overrides(j, {"a.b=2", "a.c.d=\"quoted\"", "x=", "n=null"});
  EXPECT_EQ(j["a"]["b"], 2);
  EXPECT_EQ(j["a"]["c"]["d"], "quoted");
  EXPECT_EQ(j["x"], "");
  EXPECT_TRUE(j["n"].is_null());
  EXPECT_THAT(error_of([&] { apply_overrides(j, {"novalue"}); }),
              HasSubstr("override 'novalue' must look like key=value"));
  EXPECT_THAT(error_of([&] { apply_overrides(j, {"=3"}); }), HasSubstr("must look like key=value"));
  EXPECT_THAT(error_of([&] { apply_overrides(j, {"a..b=3"}); }), HasSubstr("empty key segment in 'a..b'"));
  EXPECT_THAT(error_of([&] { apply_overrides(j, {"a.=3"}); }), HasSubstr("empty key segment"));
  EXPECT_THAT(error_of([&] { apply_overrides(j, {"a.b.c=3"}); }), HasSubstr("'a.b' is not an object (it is 2)"));
  json arr = json::array();
  EXPECT_THROW(apply_overrides(arr, {"a=1"}), Error);
}

Config batch(int64_t t, int64_t m, int64_t g) {
  Config c;
  c.train_batch_size = t;
  c.train_micro_batch_size_per_gpu = m;
  c.gradient_accumulation_steps = g;
  return c;
}

void expect_batch(const BatchSizes& b, int64_t t, int64_t m, int64_t g) {
  EXPECT_EQ(b.train_batch_size, t);
  EXPECT_EQ(b.micro, m);
  EXPECT_EQ(b.accumulation, g);
}

TEST(ResolveBatch, AllThreeGiven) {
  expect_batch(resolve_batch(batch(64, 16, 2), 2), 64, 16, 2);
  EXPECT_THAT(error_of([] { resolve_batch(batch(64, 32, 1), 3); }),
              HasSubstr("[config] train_batch_size 64 != train_micro_batch_size_per_gpu 32 * "
                        "gradient_accumulation_steps 1 * world size 3"));
}

TEST(ResolveBatch, TwoGivenDeriveTheThird) {
  expect_batch(resolve_batch(batch(64, 8, 0), 2), 64, 8, 4);  // accumulation
  expect_batch(resolve_batch(batch(64, 0, 4), 2), 64, 8, 4);  // micro
  expect_batch(resolve_batch(batch(0, 8, 4), 3), 96, 8, 4);   // train batch
  EXPECT_THAT(error_of([] { resolve_batch(batch(64, 5, 0), 3); }),
              HasSubstr("cannot derive gradient_accumulation_steps: train_batch_size 64 is not a multiple of 5 * 3"));
  EXPECT_THAT(
      error_of([] { resolve_batch(batch(64, 0, 3), 2); }),
      HasSubstr("cannot derive train_micro_batch_size_per_gpu: train_batch_size 64 is not a multiple of 3 * 2"));
  // Fewer samples than micro * world: no whole number of steps.
  EXPECT_THAT(error_of([] { resolve_batch(batch(8, 8, 0), 2); }), HasSubstr("world size 2"));
}

TEST(ResolveBatch, OneGiven) {
  expect_batch(resolve_batch(batch(64, 0, 0), 4), 64, 16, 1);
  expect_batch(resolve_batch(batch(64, 0, 0), 1), 64, 64, 1);
  expect_batch(resolve_batch(batch(0, 16, 0), 4), 64, 16, 1);
  std::string msg = error_of([] { resolve_batch(batch(64, 0, 0), 3); });
  EXPECT_THAT(msg, HasSubstr("cannot derive train_micro_batch_size_per_gpu"));
  EXPECT_THAT(msg, HasSubstr("train_batch_size 64, train_micro_batch_size_per_gpu (not set), "
                             "gradient_accumulation_steps (not set), world size 3"));
  EXPECT_THAT(error_of([] { resolve_batch(batch(0, 0, 4), 2); }),
              HasSubstr("set train_batch_size or train_micro_batch_size_per_gpu"));
  EXPECT_THAT(error_of([] { resolve_batch(batch(0, 0, 0), 1); }),
              HasSubstr("set train_batch_size or train_micro_batch_size_per_gpu"));
}

TEST(ResolveBatch, WorldSizes) {
  EXPECT_THAT(error_of([] { resolve_batch(batch(64, 0, 0), 0); }), HasSubstr("world size must be >= 1, got 0"));
  // A batch that splits over 1, 2, 4 ranks but not 3.
  for (int w : {1, 2, 4}) expect_batch(resolve_batch(batch(16, 0, 0), w), 16, 16 / w, 1);
  EXPECT_THROW(resolve_batch(batch(16, 0, 0), 3), Error);
  EXPECT_THROW(resolve_batch(batch(0, int64_t(1) << 62, 4), 4), Error);  // overflow is an error
}

}  // namespace
}  // namespace zt::config
