// Note [memory fit]: a program's own plan, as train's: "auto" with no budget stays in memory, a
// budget below the in-memory peak moves the optimizer's states to swap files, and a budget nothing
// meets is one config error naming the smallest peak.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "zt/nn/module.h"
#include "zt/train/memory_fit.h"

namespace zt::train {
namespace {

using ::testing::HasSubstr;

TEST(MemoryFit, TheLeastOffloadThatFitsTheBudget) {
  auto model = nn::make_mlp(64, {256}, 10, "relu", 1);
  zero::EngineOptions o;
  o.zero.stage = 1;
  o.zero.sub_group_size = 1024;  // small tiles, so the swap files' buffers are below the states they replace
  o.optimizer.type = "AdamW";
  o.zero.offload_optimizer.device = "auto";
  const int64_t activations = 4096;

  const MemoryFit none = fit_memory(*model, o, 2, 0, activations);
  EXPECT_EQ(zero::placement_of(none.options), zero::Placement{});
  ASSERT_EQ(none.lines.size(), 1u);
  EXPECT_THAT(none.lines[0], HasSubstr("no run.memory_budget_mb"));

  const int64_t in_memory = none.peak.in_use();
  const MemoryFit tight = fit_memory(*model, o, 2, in_memory - 1, activations);
  EXPECT_EQ(zero::placement_of(tight.options).optimizer, zero::Residence::file);
  EXPECT_LE(tight.peak.in_use(), in_memory - 1);
  EXPECT_FALSE(tight.lines.empty());

  try {
    fit_memory(*model, o, 2, 1, activations);
    FAIL() << "a budget of one byte fit";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::config);
  }
  // A placement the options name is kept: the request carries it.
  o.zero.offload_optimizer.device = "nvme";
  EXPECT_EQ(placement_request(o).optimizer, zero::Residence::file);
  EXPECT_EQ(placement_request(o).stage, 1);
}

}  // namespace
}  // namespace zt::train
