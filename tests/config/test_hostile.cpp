// Hostile configurations (issue 11): nesting deep enough to overflow the stack, huge values
// quoted in messages, sizes that overflow 64 bits, thread counts OpenMP cannot start. Each ends
// with one config error; none crashes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "models/shared.h"
#include "zt/config/config.h"
#include "zt/core/error.h"

namespace zt::config {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using zt::testing_util::error_kind_of;
using zt::testing_util::error_of;

// Nested deeper than any recursive copy or dump survives (built without recursion).
json nested_lists(int depth) {
  json v = json::array();
  for (int i = 1; i < depth; ++i) {
    json outer = json::array();
    outer.push_back(std::move(v));
    v = std::move(outer);
  }
  return v;
}

std::string nested_text(int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); }

class HostileFile : public zt::testing_util::TempDirTest {};

TEST_F(HostileFile, AFileNested53000LevelsDeepIsRejectedWithTheOffsetAndTheLimit) {
  auto p = write("deep.json", "{\"model\": " + nested_text(53'000) + "}");
  const std::string msg = error_of([&] { load(p); });
  EXPECT_THAT(msg, HasSubstr("[config] " + p +
                             ": JSON nests deeper than 64 levels at byte offset 73 (line 1, "
                             "column 74; the limit is 64)"));
  EXPECT_LT(msg.size(), 300u);
}

TEST_F(HostileFile, NestingUpToTheLimitIsParsedAndBracketsInsideStringsDoNotCount) {
  // 63 lists inside the top-level object: 64 levels, accepted by the reader (then rejected as a
  // model section, by type, not by depth).
  auto ok = write("ok.json", "{\"model\": " + nested_text(63) + "}");
  EXPECT_THAT(error_of([&] { load(ok); }), HasSubstr("'model' must be an object, got [[[[[...]]]]]"));
  auto over = write("over.json", "{\"model\": " + nested_text(64) + "}");
  EXPECT_THAT(error_of([&] { load(over); }), HasSubstr("nests deeper than 64 levels"));
  auto quoted = write("quoted.json", "{\"run\": {\"dir\": \"" + std::string(100, '[') + "\\\"[\"}}");
  EXPECT_EQ(load(quoted).run.dir, std::string(100, '[') + "\"[");
}

TEST_F(HostileFile, ANumberTooLargeForADoubleIsAConfigErrorQuotedShortened) {  // found by fuzz_config
  auto p = write("big.json", "{\"seed\": 1E" + std::string(500, '9') + "}");
  const std::string msg = error_of([&] { load(p); });
  EXPECT_THAT(msg, HasSubstr("[config] " + p + ": invalid JSON: number overflow parsing '1E999"));
  EXPECT_LT(msg.size(), 300u);
  EXPECT_EQ(error_kind_of([&] { load(p); }), ErrorKind::config);
}

// Issue 15 (d): nlohmann stops reading at a NUL byte, so what follows one went unread.
TEST_F(HostileFile, ANulByteIsRejectedWithItsOffsetEvenAfterACompleteObject) {
  auto p = write("nul.json", std::string("{\"seed\": 1}\n\0{\"seed\": 2}", 24));
  EXPECT_EQ(error_of([&] { load(p); }),
            "[config] " + p + ": a NUL byte at byte offset 12 (line 2, column 1); a config file is JSON text");
  EXPECT_EQ(error_kind_of([&] { load(p); }), ErrorKind::config);
}

// Note [duplicate JSON keys]: the last of two equal keys would win silently.
TEST_F(HostileFile, ADuplicateKeyIsRejectedNamingItAndItsObject) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"seed": 1, "seed": 2})", "duplicate key 'seed' in the top-level object"},
      {R"({"optimizer": {"params": {"lr": 1, "eps": 2, "lr": 3}}})", "duplicate key 'lr' in object 'optimizer.params'"},
      {R"({"x": [1, {"a": 1}, {"b": 1, "\u0062": 2}]})", "duplicate key 'b' in object 'x[2]'"}};  // escapes too
  for (const auto& [text, want] : cases) {
    auto p = write("dup.json", text);
    EXPECT_EQ(error_of([&] { load(p); }), "[config] " + p + ": " + want + " (each key may appear once)") << text;
  }
  // Equal keys in different objects are fine.
  EXPECT_EQ(load(write("ok.json", R"({"seed": 3, "run": {"dir": "d"}, "checkpoint": {"dir": "c"}})")).seed, 3u);
}

TEST(HostileOverride, ADuplicateKeyInAnOverridesValueIsRejectedNamingItsPath) {
  json j = json::object();
  EXPECT_EQ(error_of([&] { apply_overrides(j, {R"(optimizer.params={"lr": 1, "lr": 2})"}); }),
            R"([config] override 'optimizer.params={"lr": 1, "lr": 2}': duplicate key 'lr' in object )"
            "'optimizer.params' (each key may appear once)");
  apply_overrides(j, {"run.dir={not json"});  // still a plain string
  EXPECT_EQ(j["run"]["dir"], "{not json");
}

TEST(HostileOverride, AnOverrideNested53000LevelsDeepIsRejectedNamingItShortened) {
  const std::string o = "model=" + nested_text(53'000);
  json j = json::object();
  const std::string msg = error_of([&] { apply_overrides(j, {o}); });
  EXPECT_THAT(msg, HasSubstr("[config] override 'model=[[[["));
  EXPECT_THAT(msg, HasSubstr("(106006 bytes)' nests deeper than 64 levels"));
  EXPECT_LT(msg.size(), 300u);
  EXPECT_EQ(error_kind_of([&] { apply_overrides(j, {o}); }), ErrorKind::config);
}

TEST(HostileOverride, TheSectionsAKeyWalksCountTowardsTheLimit) {
  json j = json::object();
  apply_overrides(j, {"a.b=" + nested_text(62)});  // top, a, then 62 lists: 64 levels
  EXPECT_THAT(error_of([&] { apply_overrides(j, {"a.b=" + nested_text(63)}); }), HasSubstr("nests deeper"));
  std::string key = "k";
  for (int i = 0; i < 70'000; ++i) key += ".k";
  EXPECT_THAT(error_of([&] { apply_overrides(j, {key + "=1"}); }), HasSubstr("nests deeper than 64 levels"));
}

TEST(HostileOverride, AnOverrideThatIsNotUtf8IsRejected) {
  json j = json::object();
  EXPECT_THAT(error_of([&] { apply_overrides(j, {"run.dir=\xff\xfe"}); }), HasSubstr("is not valid UTF-8"));
}

TEST(HostileParse, ParseRejectsADeepValueBeforeCopyingItNamingTheSection) {
  json j = {{"scheduler", {{"type", "WarmupLR"}, {"params", {{"warmup_num_steps", nested_lists(300'000)}}}}}};
  const std::string msg = error_of([&] { parse(j, "cfg.json"); });
  EXPECT_THAT(msg, HasSubstr("[config] cfg.json: 'scheduler' nests deeper than 64 levels"));
  // Top level, scheduler, params, then 61 lists: 64 levels.
  json shallow = {{"scheduler", {{"type", "WarmupLR"}, {"params", {{"warmup_num_steps", nested_lists(61)}}}}}};
  EXPECT_EQ(parse(shallow).scheduler.params["warmup_num_steps"], nested_lists(61));
}

TEST(HostileParse, ValuesQuotedInMessagesAreShortened) {
  json long_string = {{"run", {{"dir", 7}}}, {"model", std::string(100'000, 'x')}};
  std::string msg = error_of([&] { parse(long_string, "cfg.json"); });
  EXPECT_THAT(msg, HasSubstr("'model' must be an object, got \"xxxx"));
  EXPECT_LT(msg.size(), 200u);
  json wide = {{"model", {{"hidden", json(std::vector<double>(100'000, 0.5))}}}};
  msg = error_of([&] { parse(wide, "cfg.json"); });
  EXPECT_THAT(msg, HasSubstr("'model.hidden' must be a list of positive integers, got [0.5,0.5,"));
  EXPECT_LT(msg.size(), 250u);
  // Short values print whole, as nlohmann's compact dump does.
  EXPECT_THAT(error_of(([&] {
                parse({{"model", {{"hidden", {1, "a", {{"b", nullptr}}}}}}}, "c");
              })),
              HasSubstr("got [1,\"a\",{\"b\":null}]"));
  // A key of 100,000 characters is quoted shortened too.
  msg = error_of([&] { parse({{std::string(100'000, 'k'), 1}}, "cfg.json"); });
  EXPECT_THAT(msg, HasSubstr("unknown key 'kkkk"));
  EXPECT_LT(msg.size(), 600u);
}

TEST(HostileParse, ModelSizesWhoseProductOverflowsAreConfigErrors) {
  for (const json& model :
       {json{{"hidden", {4611686018427387904LL}}}, json{{"input_dim", 3037000500LL}, {"hidden", {3037000500LL}}},
        json{{"hidden", {2147483648LL, 2147483648LL}}},  // 2^62 weights: the fp32 bytes overflow
        json{{"hidden", {1}}, {"num_classes", 9223372036854775807LL}}}) {
    const std::string msg = error_of([&] { parse({{"model", model}}, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("give more parameters than 64-bit sizes can count")) << model.dump();
    EXPECT_THAT(msg, HasSubstr("model.hidden [")) << model.dump();
  }
  // Large but countable: accepted here (allocation is the model's concern).
  EXPECT_EQ(parse({{"model", {{"hidden", {1'000'000'000'000LL}}}}}).model.as<apps::MlpKeys>().hidden[0],
            1'000'000'000'000LL);
}

TEST(HostileParse, ThreadsAreBoundedAndTheRangeIsSaid) {
  EXPECT_THAT(error_of([&] {
                parse({{"run", {{"threads", 100'000}}}}, "cfg.json");
              }),
              HasSubstr("'run.threads' must be an integer in 0..1024, got 100000"));
  EXPECT_EQ(parse({{"run", {{"threads", kMaxThreads}}}}).run.threads, 1024);
  EXPECT_EQ(parse({{"run", {{"threads", 0}}}}).run.threads, 0);
}

TEST(HostileParse, AMemoryBudgetWhoseBytesOverflowIsRejected) {
  EXPECT_THAT(error_of([&] {
                parse({{"run", {{"memory_budget_mb", 17592186044416LL}}}}, "cfg.json");
              }),
              HasSubstr("'run.memory_budget_mb' must be an integer in 0..8796093022207"));
  EXPECT_EQ(parse({{"run", {{"memory_budget_mb", kMaxMemoryBudgetMb}}}}).run.memory_budget_mb, kMaxMemoryBudgetMb);
}

// Issue 15 (c): the optimizer runs in fp32, where 1e300 would be inf, and said so naming no key.
TEST(HostileParse, OptimizerValuesBeyondFp32AreRejectedNamingTheKeyAndTheRange) {
  EXPECT_EQ(error_of([&] {
              parse({{"optimizer", {{"params", {{"lr", 1e300}}}}}}, "cfg.json");
            }),
            "[config] cfg.json: 'optimizer.params.lr' must be a number in (0, 3.4e+38], got 1e+300");
  for (const char* key : {"eps", "weight_decay"})
    EXPECT_THAT(error_of([&] {
                  parse({{"optimizer", {{"params", {{key, 1e39}}}}}}, "cfg.json");
                }),
                HasSubstr(std::string("'optimizer.params.") + key + "' must be a number in "))
        << key;
  EXPECT_THAT(error_of([&] {
                parse({{"optimizer", {{"type", "SGD"}, {"params", {{"momentum", 1e39}}}}}}, "cfg.json");
              }),
              HasSubstr("'optimizer.params.momentum' must be a number in [0, 3.4e+38], got 1e+39"));
  EXPECT_EQ(parse({{"optimizer", {{"params", {{"lr", 3.4e38}}}}}}).optimizer.lr, 3.4e38);
}

TEST(HostileParse, EpochsMustBeFiniteAndPositive) {
  for (const json& e : {json(0), json(-1), json(std::numeric_limits<double>::infinity()), json("2")})
    EXPECT_THAT(error_of([&] {
                  parse({{"run", {{"epochs", e}}}}, "cfg.json");
                }),
                HasSubstr("'run.epochs' must be a positive number"))
        << e.dump();
  EXPECT_EQ(parse({{"run", {{"epochs", 1e16}}}}).run.epochs, 1e16);  // the step count is train's to check
}

// run.strategy / run.parameter_servers (Note [parameter server]): hostile values are one line
// naming the key; keys the parameter server cannot honour say so, naming what is allowed.
TEST(HostileParse, StrategyAndParameterServersAreCheckedNamingTheKey) {
  for (const json& v : {json("ps"), json(1), json(nullptr), json("ZERO")})
    EXPECT_THAT(error_of([&] {
                  parse({{"run", {{"strategy", v}}}}, "cfg.json");
                }),
                HasSubstr("'run.strategy' must be one of zero, parameter_server"))
        << v.dump();
  for (const json& v : {json(-3), json(1.5), json("2"), json(nullptr)})
    EXPECT_THAT(error_of([&] {
                  parse({{"run", {{"parameter_servers", v}}}}, "cfg.json");
                }),
                HasSubstr("'run.parameter_servers' must be a"))
        << v.dump();
  EXPECT_THAT(error_of([] {
                parse({{"run", {{"parameter_servers", 0}}}}, "cfg.json");
              }),
              HasSubstr("'run.parameter_servers' must be a positive integer (the nearest valid value is 1), got 0"));
  EXPECT_THAT(error_of([] {
                parse({{"run", {{"parameter_servers", 1e12}}}}, "cfg.json");
              }),
              HasSubstr("'run.parameter_servers' must be less than the world size (and than 2^31)"));
  EXPECT_THAT(error_of([] {
                parse({{"run", {{"parameter_server", 2}}}}, "cfg.json");
              }),
              HasSubstr("(did you mean 'run.parameter_servers'?)"));
  const Config c = parse({{"run", {{"strategy", "parameter_server"}, {"parameter_servers", 2}}}});
  EXPECT_EQ(c.run.strategy, "parameter_server");
  EXPECT_EQ(c.run.parameter_servers, 2);
  EXPECT_EQ(parse(json::object()).run.strategy, "zero");
  EXPECT_EQ(parse(json::object()).run.parameter_servers, 1);
}

TEST(HostileParse, KeysTheParameterServerCannotHonourAreRefusedInOneLine) {
  const json ps = {{"strategy", "parameter_server"}};
  const std::pair<json, std::string> cases[] = {
      {{{"fp16", {{"enabled", true}}}}, "'fp16.enabled' = true is not available with run.strategy parameter_server"},
      {{{"zero_optimization", {{"offload_optimizer", {{"device", "nvme"}, {"nvme_path", "/tmp"}}}}}},
       "'zero_optimization.offload_optimizer.device' = nvme is not available"},
      {{{"zero_optimization", {{"offload_param", {{"device", "auto"}, {"nvme_path", "/tmp"}}}}}},
       "'zero_optimization.offload_param.device' = auto is not available"},
      {{{"checkpoint", {{"every_steps", 5}}}}, "'checkpoint.every_steps' = 5 is not available"},
      {{{"run", {{"resume", "latest"}}}}, "'run.resume' = 'latest' is not available"},
      {{{"run", {{"memory_budget_mb", 100}}}}, "'run.memory_budget_mb' = 100 is not available"},
      {{{"run", {{"comm_backend", "shm"}}}}, "'run.comm_backend' = shm is not available"},
      {{{"run", {{"comm_backend", "nccl"}}}}, "'run.comm_backend' = nccl is not available"},
      {{{"sparse_gradients", true}}, "'sparse_gradients' = true is not available"},
  };
  for (const auto& [extra, want] : cases) {
    json j = extra;
    for (auto& [k, v] : ps.items()) j["run"][k] = v;
    const std::string msg = error_of([&] { parse(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr(want)) << j.dump();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(error_kind_of([&] { parse(j, "cfg.json"); }), ErrorKind::config);
    j["run"]["strategy"] = "zero";  // each is fine under ZeRO (given what else it needs)
    if (extra.contains("zero_optimization") || extra.contains("run")) continue;
    EXPECT_NO_THROW(parse(j, "cfg.json")) << j.dump();
  }
  // zero_optimization.stage is not used by the parameter server, so any valid stage passes.
  EXPECT_NO_THROW(parse({{"zero_optimization", {{"stage", 3}}}, {"run", ps}}));
}

TEST(HostileParse, ParameterServersMustLeaveAWorkerAtTheWorldSize) {
  Config c = parse({{"train_micro_batch_size_per_gpu", 4}, {"run", {{"strategy", "parameter_server"}}}});
  EXPECT_EQ(data_parallel_ranks(c, 2), 1);
  EXPECT_EQ(data_parallel_ranks(c, 4), 3);
  EXPECT_EQ(resolve_batch(c, data_parallel_ranks(c, 4)).train_batch_size, 12);  // micro x accumulation x workers
  c.run.parameter_servers = 3;
  EXPECT_EQ(data_parallel_ranks(c, 4), 1);
  const std::string msg = error_of([&] { data_parallel_ranks(c, 3); });
  EXPECT_EQ(msg,
            "[config] run.parameter_servers = 3 leaves no worker at world size 3 (it must be less than the world "
            "size; the nearest valid value is 2)");
  EXPECT_EQ(error_kind_of([&] { data_parallel_ranks(c, 3); }), ErrorKind::config);
  EXPECT_THAT(error_of([&] { data_parallel_ranks(c, 1); }), HasSubstr("needs at least 2 ranks"));
  c.run.strategy = "zero";
  EXPECT_EQ(data_parallel_ranks(c, 3), 3);
}

// Issue 31, probe case 10: a control character (a NUL above all) in a path-valued key is refused,
// naming the key and the byte, before anything is made at the path's prefix.
TEST(HostileParse, APathWithAControlCharacterIsRefusedNamingTheKeyAndTheByte) {
  const std::string nul("/tmp/zt\0evil", 12);
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"train_batch_size", 8}, {"run", {{"dir", nul}}}}, "'run.dir' is a path and cannot hold control characters; byte 7 is 0x00"},
      {{{"train_batch_size", 8}, {"checkpoint", {{"dir", "a\nb"}}}}, "'checkpoint.dir' is a path and cannot hold control characters; byte 1 is 0x0a"},
      {{{"train_batch_size", 8}, {"data", {{"dir", "x\x7f"}}}}, "'data.dir' is a path and cannot hold control characters; byte 1 is 0x7f"},
      {{{"train_batch_size", 8},
        {"zero_optimization",
         {{"offload_optimizer", {{"device", "nvme"}, {"nvme_path", nul}}}}}},
       "'zero_optimization.offload_optimizer.nvme_path' is a path and cannot hold control characters; byte 7 is 0x00"},
  };
  for (const auto& [j, want] : cases) {
    const std::string msg = error_of([&] { (void)parse(j, "c.json"); });
    EXPECT_THAT(msg, HasSubstr(want)) << j.dump();
    EXPECT_EQ(msg.find('\0'), std::string::npos);
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace zt::config
