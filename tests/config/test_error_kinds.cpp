// Every way a configuration can be wrong reaches the caller as ErrorKind::config (the CLI
// relies on it: Note [errors across ranks]); misuse of the API stays invalid_argument.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "zt/config/config.h"

namespace zt::config {
namespace {

using json = nlohmann::json;
using zt::testing_util::error_kind_of;

class ConfigErrorKind : public zt::testing_util::TempDirTest {
 protected:
  std::string write(const std::string& text) { return TempDirTest::write("ds.json", text); }
};

TEST_F(ConfigErrorKind, AnUnknownKeyIsAConfigError) {
  EXPECT_EQ(error_kind_of([] { parse(json{{"zero_optimization", {{"stagee", 2}}}}); }), ErrorKind::config);
  EXPECT_EQ(error_kind_of([] { parse(json{{"no_such_key_at_all", 1}}); }), ErrorKind::config);  // no near match
  auto p = write(R"({"train_batch_size": 32})");
  EXPECT_EQ(error_kind_of([&] { load(p, {"zero_optimization.stagee=2"}); }), ErrorKind::config);
  EXPECT_NO_THROW(load(p, {"zero_optimization.stage=2"}));  // the same file with a known key loads
}

TEST_F(ConfigErrorKind, WrongValuesFilesAndOverridesAreConfigErrors) {
  EXPECT_EQ(error_kind_of([] { parse(json{{"zero_optimization", {{"stage", 7}}}}); }), ErrorKind::config);
  EXPECT_EQ(error_kind_of([] { parse(json{{"steps_per_print", "often"}}); }), ErrorKind::config);
  EXPECT_EQ(error_kind_of([] {
              parse(json{{"fp16", {{"enabled", true}}}, {"bf16", {{"enabled", true}}}});
            }),
            ErrorKind::config);
  EXPECT_EQ(error_kind_of([&] { load((dir_ / "missing.json").string()); }), ErrorKind::config);
  EXPECT_EQ(error_kind_of([&] { load(write("{\"train_batch_size\": 32,")); }), ErrorKind::config);
  EXPECT_EQ(error_kind_of([&] { load(write("[1, 2]")); }), ErrorKind::config);
  auto p = write("{}");
  EXPECT_EQ(error_kind_of([&] { load(p, {"no_equals_sign"}); }), ErrorKind::config);
  EXPECT_EQ(error_kind_of([&] { load(p, {"a..b=1"}); }), ErrorKind::config);
  EXPECT_EQ(error_kind_of([&] { load(p, {"seed=1", "seed.x=2"}); }), ErrorKind::config);
}

TEST(ConfigErrorKindBatch, ImpossibleBatchSizesAreConfigErrorsAndABadWorldSizeIsMisuse) {
  Config c = parse(json{{"train_batch_size", 64}, {"train_micro_batch_size_per_gpu", 32}});
  EXPECT_NO_THROW(resolve_batch(c, 2));
  EXPECT_EQ(error_kind_of([&] { resolve_batch(c, 3); }), ErrorKind::config);  // 64 is not 32 * k * 3
  EXPECT_EQ(error_kind_of([&] { resolve_batch(parse(json::object()), 1); }), ErrorKind::config);  // no batch set
  EXPECT_EQ(error_kind_of([&] { resolve_batch(c, 0); }), ErrorKind::invalid_argument);  // the caller's mistake
}

}  // namespace
}  // namespace zt::config
