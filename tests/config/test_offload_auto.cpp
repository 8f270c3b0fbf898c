// offload_optimizer / offload_param device "auto" (Note [budget choice]): accepted with a folder
// to offload to; what it becomes is decided against run.memory_budget_mb before training.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "zt/config/config.h"
#include "zt/core/error.h"

namespace zt::config {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string error_of(const json& j) {
  try {
    parse(j, "cfg.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::config);
    return e.what();
  }
  return "";
}

TEST(ConfigOffloadAuto, AutoIsADeviceThatNeedsAFolder) {
  for (const char* section : {"offload_optimizer", "offload_param"}) {
    const Config c = parse({{"zero_optimization", {{"stage", 3}, {section, {{"device", "auto"}, {"nvme_path", "/x"}}}}},
                            {"run", {{"memory_budget_mb", 512}}}});
    const OffloadConfig& o = std::string(section) == "offload_param" ? c.zero.offload_param : c.zero.offload_optimizer;
    EXPECT_EQ(o.device, "auto") << section;
    EXPECT_EQ(o.nvme_path, "/x") << section;
    EXPECT_THAT(error_of({{"zero_optimization", {{section, {{"device", "auto"}}}}}}),
                HasSubstr("'zero_optimization." + std::string(section) +
                          ".device' = \"auto\" needs 'zero_optimization." + section + ".nvme_path'"));
  }
  EXPECT_THAT(error_of({{"zero_optimization", {{"offload_optimizer", {{"device", "disk"}}}}}}),
              HasSubstr("none, cpu, nvme, auto"));
}

}  // namespace
}  // namespace zt::config
