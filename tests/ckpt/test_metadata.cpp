// metadata.json is outside input: every field the loader and tools use is checked for type and
// range before it is trusted (Note [checkpoint metadata validation]), naming the field.
#include <gtest/gtest.h>

#include <functional>

#include "zt/ckpt/metadata.h"
#include "zt/core/error.h"

using nlohmann::json;
using namespace zt;

namespace {

// Two parameters (2x3 and 4) in one buffer padded to 16, saved by 2 ranks (8 elements each).
json valid() {
  return json::parse(R"({
    "format": 1, "world_size": 2, "stage": 2, "dtype": "f32", "optimizer": "AdamW",
    "params": [{"name": "w", "shape": [2, 3]}, {"name": "b", "shape": [4]}],
    "buffers": [{"numel": 10, "padded": 16, "params": [[0, 0, 6], [1, 6, 4]]}],
    "entries": {"b0.param": {"dtype": "f32", "offset": 0, "numel": 8},
                "b0.exp_avg": {"dtype": "f32", "offset": 32, "numel": 8}},
    "shards": [{"file": "rank_00000.bin", "xxh64": "0123456789abcdef", "bytes": 64},
               {"file": "rank_00001.bin", "xxh64": "fedcba9876543210", "bytes": 64}],
    "counters": {"optimizer_steps": 3}, "extra": {"step": 3}, "step": 3})");
}

std::string error_of(const json& m) {
  try {
    ckpt::parse_metadata(m.dump(), "meta.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::checkpoint) << e.what();
    return e.what();
  }
  return "";
}

TEST(CheckpointMetadata, AValidFileParses) { EXPECT_EQ(error_of(valid()), ""); }

TEST(CheckpointMetadata, EveryFieldIsCheckedAndNamed) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& m) { m["format"] = 2; }, "'format' is 2, outside [1, 1]"},
      {[](json& m) { m["world_size"] = "two"; }, "'world_size' must be an integer"},
      {[](json& m) { m["stage"] = 7; }, "'stage' is 7"},
      {[](json& m) { m["dtype"] = "f64"; }, "'dtype' is 'f64', not f32, bf16 or f16"},
      {[](json& m) { m.erase("params"); }, "'params' is missing"},
      {[](json& m) {
         m["params"][0]["shape"] = {2, -3};
       },
       "'params[0].shape' is -3"},
      {[](json& m) {
         m["params"][0]["shape"] = {int64_t(1) << 40, int64_t(1) << 40};
       },
       "'params[0].shape' is too large"},
      {[](json& m) { m["buffers"][0]["padded"] = 15; }, "'buffers[0].padded' is not divisible by world_size 2"},
      {[](json& m) {
         m["buffers"][0]["params"][1] = {1, 8, 4};
       },
       "'buffers[0].params[].numel' is 4, outside [0, 2]"},
      {[](json& m) {
         m["buffers"][0]["params"][1] = {0, 6, 4};
       },
       "gives parameter 0 the wrong size"},
      {[](json& m) { m["buffers"][0]["params"].erase(1); }, "'buffers' place parameter 1 0 times"},
      {[](json& m) { m["entries"]["b7.param"] = m["entries"]["b0.param"]; },
       "'entries.b7.param' names no saved buffer"},
      {[](json& m) { m["entries"]["b0.param"]["numel"] = 9; }, "'entries.b0.param.numel' is 9, outside [8, 8]"},
      {[](json& m) { m["shards"].erase(1); }, "'shards' must have 2 entries"},
      {[](json& m) { m["shards"][1]["file"] = "../../etc/passwd"; }, "'shards[1].file' must be rank_00001.bin"},
      {[](json& m) { m["shards"][0]["xxh64"] = "xyz"; }, "'shards[0].xxh64' must be 16 hex digits"},
      {[](json& m) { m["shards"][0]["bytes"] = 63; }, "'shards[0].bytes' is 63, outside [64, 64]"},
      {[](json& m) { m["counters"]["optimizer_steps"] = -1; }, "'counters.optimizer_steps' is -1"},
      {[](json& m) { m["extra"] = 5; }, "'extra' must be an object"},
  };
  for (const auto& [mutate, want] : cases) {
    json m = valid();
    mutate(m);
    const std::string got = error_of(m);
    EXPECT_NE(got.find(want), std::string::npos) << "want: " << want << "\ngot: " << got;
  }
}

TEST(CheckpointMetadata, DeepNestingAndNonJsonAreRefusedBeforeTheyAreWalked) {
  EXPECT_NE(error_of(json()).find("not a JSON object"), std::string::npos);
  try {
    ckpt::parse_metadata(std::string(100000, '[') + std::string(100000, ']'), "meta.json");
    ADD_FAILURE() << "deep nesting accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nesting deeper than 80 levels at byte 80"), std::string::npos) << e.what();
  }
}

}  // namespace
