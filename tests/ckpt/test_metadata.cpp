// metadata.json is outside input: every field the loader and tools use is checked for type and
// range before it is trusted (Note [checkpoint metadata validation]), naming the field.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "zt/ckpt/metadata.h"
#include "zt/core/error.h"

using nlohmann::json;
using namespace zt;

namespace {

std::string read_seed(const std::string& name) {
  std::ifstream f(std::string(ZT_SOURCE_DIR) + "/fuzz/corpus/fuzz_ckpt_metadata/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The fuzz target's seed (fuzz/make_corpus.py): two parameters (2x3 and 4) in one buffer padded
// to 16, saved by 2 ranks (8 elements each), AdamW state, fp16 counters; its checksum dropped.
json valid() {
  json m = json::parse(read_seed("small.json"));
  m.erase("metadata_xxh64");
  return m;
}

// `m` with its checksum recomputed, as a save writes it; sealed=false keeps the one it has.
std::string error_of(json m, bool sealed = true) {
  if (sealed && m.is_object()) m["metadata_xxh64"] = ckpt::metadata_checksum(m);
  try {
    ckpt::parse_metadata(m.dump(), "meta.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::checkpoint) << e.what();
    return e.what();
  }
  return "";
}

std::string error_text(const std::string& text) {
  try {
    ckpt::parse_metadata(text, "meta.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::checkpoint) << e.what();
    return e.what();
  }
  return "";
}

TEST(CheckpointMetadata, AValidFileParses) { EXPECT_EQ(error_of(valid()), ""); }

TEST(CheckpointMetadata, EveryFieldIsCheckedAndNamed) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& m) { m["format"] = 3; }, "'format' is 3, outside [1, 2]"},
      {[](json& m) { m["format"] = 1; }, "'format' is 1: written by an earlier zerotrain"},
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
      {[](json& m) { m.erase("extra"); }, "'extra' is missing"},
      {[](json& m) { m["extra"]["step"] = -4; }, "'extra.step' is -4, outside [0, "},
      {[](json& m) { m["extra"]["step"] = 2.5; }, "'extra.step' must be an integer"},
      {[](json& m) { m["extra"]["step"] = json::parse("1e30"); }, "'extra.step' must be an integer"},
      {[](json& m) { m["extra"]["step"] = 4; }, "'extra.step' differs from 'step' 3"},
      {[](json& m) { m["extra"]["train_batch_size"] = 0; }, "'extra.train_batch_size' is 0"},
      {[](json& m) { m["extra"]["skipped_steps"] = 9; }, "'extra.skipped_steps' is 9, outside [0, 3]"},
      {[](json& m) { m.erase("step"); }, "'step' is missing"},
      {[](json& m) { m["tag"] = 7; }, "'tag' must be a string"},
      {[](json& m) { m["tag"] = "a\nb"; }, "'tag' is 'a\\x0ab', not a checkpoint tag"},
      {[](json& m) {
         m["counters"]["loss_scaler"] = {{"scale", -1.0}, {"cur_hysteresis", 2}, {"last_overflow_iter", -1},
                                         {"cur_iter", 3}, {"skipped_steps", 0}};
       },
       "'counters.loss_scaler.scale' must be a positive finite number"},
  };
  for (const auto& [mutate, want] : cases) {
    json m = valid();
    mutate(m);
    const std::string got = error_of(m);
    EXPECT_NE(got.find(want), std::string::npos) << "want: " << want << "\ngot: " << got;
  }
}

// Note [metadata checksum]: an edit that keeps every field in range still shows.
TEST(CheckpointMetadata, AnEditThatStaysConsistentFailsTheChecksum) {
  json m = valid();
  m["metadata_xxh64"] = ckpt::metadata_checksum(m);
  EXPECT_EQ(error_of(m, false), "");
  m["counters"]["optimizer_steps"] = 2;  // in range, consistent, and not what was saved
  EXPECT_NE(error_of(m, false).find("'metadata_xxh64' does not match the file's contents"), std::string::npos);
  m.erase("metadata_xxh64");
  EXPECT_NE(error_of(m, false).find("'metadata_xxh64' is missing"), std::string::npos);
}

// The fuzz target's seeds (fuzz/make_corpus.py seals them in Python): the valid ones parse, each
// hostile case is refused naming its field.
TEST(CheckpointMetadata, TheFuzzSeedsAreSealedAsASaveSealsThem) {

  for (const char* ok : {"small.json", "mlp_stage2.json"}) EXPECT_NO_THROW(ckpt::parse_metadata(read_seed(ok), ok)) << ok;
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"no_extra", "'extra' is missing"},         {"step_negative", "'extra.step' is -3"},
      {"step_fraction", "'extra.step' must be"},  {"step_huge", "'extra.step' must be an integer"},
      {"tag_not_a_string", "'tag' must be"},      {"tag_line_break", "'tag' is 'a\\x0ab'"},
      {"tag_nul", "'tag' is 'a\\x00b'"},          {"format_1", "'format' is 1"},
      {"consistent_edit", "'metadata_xxh64' does not match"}};
  for (const auto& [name, want] : refused) {
    try {
      ckpt::parse_metadata(read_seed(name), name);
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << name << ": " << e.what();
    }
  }
}

TEST(CheckpointTags, OnlyPlainNamesAreTags) {
  for (const char* ok : {"step_00000040", "a", "v1.2-final+b"}) EXPECT_TRUE(ckpt::valid_tag(ok)) << ok;
  for (const std::string& bad : {std::string(), std::string("latest"), std::string(".hidden"), std::string("a/b"),
                                std::string("x.partial"), std::string("a\nb"), std::string("a\0b", 3),
                                std::string(129, 'a'), std::string("caf\xc3\xa9")})
    EXPECT_FALSE(ckpt::valid_tag(bad)) << bad;
  try {
    ckpt::check_tag(std::string("a\0b", 3), "latest names");
    ADD_FAILURE() << "a NUL in a tag was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("latest names 'a\\x00b', which is not a checkpoint tag"), std::string::npos)
        << e.what();
  }
}

// Note [duplicate JSON keys]: a second "step" after the sealed first one, and bytes after a NUL.
TEST(CheckpointMetadata, DuplicateKeysAndNulBytesAreRefusedSayingWhere) {
  json m = valid();
  m["metadata_xxh64"] = ckpt::metadata_checksum(m);
  std::string text = m.dump();
  const std::string twice = text.substr(0, text.size() - 1) + ", \"step\": 9}";
  EXPECT_NE(error_text(twice).find("meta.json: duplicate key 'step' in the top-level object"), std::string::npos)
      << error_text(twice);
  const std::string nested = std::string(R"({"counters": {"optimizer_steps": 1, "optimizer_steps": 2}})");
  EXPECT_NE(error_text(nested).find("duplicate key 'optimizer_steps' in 'counters'"), std::string::npos);
  const std::string nul = text + std::string(1, '\0') + "garbage";
  EXPECT_NE(error_text(nul).find("meta.json: a NUL byte at byte " + std::to_string(text.size())), std::string::npos)
      << error_text(nul);
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
