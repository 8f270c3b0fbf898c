// parse(): defaults, a full DeepSpeed config, and the errors for unknown keys, wrong types
// and values out of range at every level.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/llama.h"
#include "models/shared.h"
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
    return e.what();
  }
  ADD_FAILURE() << "expected zt::Error for " << j.dump();
  return "";
}

TEST(ConfigParse, EmptyObjectGivesDefaults) {
  Config c = parse(json::object());
  EXPECT_EQ(c.train_batch_size, 0);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 0);
  EXPECT_EQ(c.gradient_accumulation_steps, 0);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_FALSE(c.bf16);
  EXPECT_EQ(c.optimizer.type, "AdamW");
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 1e-3);
  EXPECT_EQ(c.scheduler.type, "");
  EXPECT_EQ(c.zero.stage, 0);
  EXPECT_EQ(c.model.as<apps::MlpKeys>().hidden, (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(c.data.dir, "data/mnist");
  EXPECT_EQ(c.run.comm_backend, "auto");
  EXPECT_EQ(c.run.bf16_products, "auto");
  EXPECT_EQ(c.raw, json::object());
  // The struct's own defaults agree with parsing an empty file.
  Config d;
  EXPECT_EQ(d.optimizer.type, c.optimizer.type);
  EXPECT_EQ(d.optimizer.weight_decay, c.optimizer.weight_decay);
}

TEST(ConfigParse, FullDeepSpeedConfig) {
  json j = json::parse(R"({
    "train_batch_size": 64, "train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 2,
    "gradient_clipping": 1.0, "steps_per_print": 50, "seed": 1234, "wall_clock_breakdown": false,
    "zero_allow_untested_optimizer": true, "sparse_gradients": false, "prescale_gradients": false,
    "bf16": {"enabled": true},
    "fp16": {"enabled": false, "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000,
             "hysteresis": 2, "min_loss_scale": 1},
    "optimizer": {"type": "adamw", "params": {"lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6,
                  "weight_decay": 0.1, "torch_adam": true, "adam_w_mode": true}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 100, "total_num_steps": 1000}},
    "zero_optimization": {"stage": 3, "overlap_comm": false, "contiguous_gradients": true,
      "reduce_bucket_size": 5e8, "allgather_bucket_size": 200000000, "stage3_prefetch_bucket_size": 1000,
      "stage3_max_live_parameters": 1e9, "stage3_param_persistence_threshold": 10,
      "reduce_scatter": true, "allgather_partitions": true, "sub_group_size": 1e9,
      "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": true,
      "offload_optimizer": {"device": "none", "pin_memory": true}, "offload_param": {"device": "none"}},
    "model": {"type": "mlp", "hidden": [128, 64, 32], "activation": "gelu", "input_dim": 784, "num_classes": 10},
    "data": {"dataset": "fashion-mnist", "shuffle": false, "train_limit": 1000, "test_limit": 500},
    "run": {"dir": "runs/x", "epochs": 2.5, "max_steps": 10, "threads": 2, "comm_backend": "mpi",
            "comm_timeout_s": 30, "memory_budget_mb": 512, "eval_at_end": false}
  })");
  Config c = parse(j);
  EXPECT_EQ(c.train_batch_size, 64);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 16);
  EXPECT_EQ(c.gradient_accumulation_steps, 2);
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(c.steps_per_print, 50);
  EXPECT_EQ(c.seed, 1234u);
  EXPECT_TRUE(c.bf16);
  EXPECT_EQ(c.optimizer.type, "AdamW");
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.95);
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.1);
  EXPECT_EQ(c.scheduler.type, "WarmupDecayLR");
  EXPECT_EQ(c.scheduler.params["total_num_steps"], 1000);
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_FALSE(c.zero.overlap_comm);
  EXPECT_EQ(c.zero.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.zero.allgather_bucket_size, 200000000);
  EXPECT_EQ(c.zero.stage3_prefetch_bucket_size, 1000);
  EXPECT_EQ(c.zero.stage3_max_live_parameters, 1000000000);
  EXPECT_EQ(c.zero.stage3_param_persistence_threshold, 10);
  EXPECT_EQ(c.model.as<apps::MlpKeys>().hidden, (std::vector<int64_t>{128, 64, 32}));
  EXPECT_EQ(c.model.as<apps::MlpKeys>().activation, "gelu");
  EXPECT_EQ(c.data.dataset, "fashion-mnist");
  EXPECT_EQ(c.data.dir, "data/fashion-mnist");  // follows the dataset unless given
  EXPECT_FALSE(c.data.shuffle);
  EXPECT_EQ(c.data.train_limit, 1000);
  EXPECT_EQ(c.run.dir, "runs/x");
  EXPECT_DOUBLE_EQ(c.run.epochs, 2.5);
  EXPECT_EQ(c.run.max_steps, 10);
  EXPECT_EQ(c.run.threads, 2);
  EXPECT_EQ(c.run.comm_backend, "mpi");
  EXPECT_DOUBLE_EQ(c.run.comm_timeout_s, 30.0);
  EXPECT_EQ(c.run.memory_budget_mb, 512);
  EXPECT_FALSE(c.run.eval_at_end);
  EXPECT_EQ(c.raw, j);
}

TEST(ConfigParse, OptimizerTypesAndDefaults) {
  auto opt = [](const json& o) { return parse(json{{"optimizer", o}}).optimizer; };
  // DeepSpeed: type Adam with adam_w_mode (default true) is AdamW, with Adam's default decay 0.
  OptimizerConfig a = opt({{"type", "Adam"}});
  EXPECT_EQ(a.type, "AdamW");
  EXPECT_DOUBLE_EQ(a.weight_decay, 0.0);
  OptimizerConfig l2 = opt({{"type", "ADAM"}, {"params", {{"adam_w_mode", false}, {"weight_decay", 0.1}}}});
  EXPECT_EQ(l2.type, "Adam");
  EXPECT_DOUBLE_EQ(l2.weight_decay, 0.1);
  OptimizerConfig w = opt({{"type", "AdamW"}});
  EXPECT_EQ(w.type, "AdamW");
  EXPECT_DOUBLE_EQ(w.weight_decay, 0.01);
  OptimizerConfig s = opt({{"type", "sgd"}, {"params", {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}}}});
  EXPECT_EQ(s.type, "SGD");
  EXPECT_DOUBLE_EQ(s.momentum, 0.9);
  EXPECT_TRUE(s.nesterov);
  EXPECT_DOUBLE_EQ(s.weight_decay, 0.0);
}

TEST(ConfigParse, OptimizerParamsMustFitTheType) {
  EXPECT_THAT(error_of({{"optimizer", {{"type", "SGD"}, {"params", {{"betas", {0.9, 0.99}}}}}}}),
              HasSubstr("'optimizer.params.betas' applies to Adam/AdamW, not to optimizer type SGD"));
  EXPECT_THAT(error_of({{"optimizer", {{"type", "AdamW"}, {"params", {{"momentum", 0.9}}}}}}),
              HasSubstr("'optimizer.params.momentum' applies to SGD"));
  EXPECT_THAT(error_of({{"optimizer", {{"type", "SGD"}, {"params", {{"nesterov", true}}}}}}),
              HasSubstr("'optimizer.params.nesterov' = true needs 'optimizer.params.momentum' > 0"));
  EXPECT_THAT(error_of({{"optimizer", {{"type", "AdamW"}, {"params", {{"adam_w_mode", false}}}}}}),
              HasSubstr("contradicts optimizer type AdamW"));
  EXPECT_THAT(error_of({{"optimizer", {{"type", "Adagrad"}}}}),
              HasSubstr("'optimizer.type' must be one of Adam, AdamW, SGD (any case), got \"Adagrad\""));
}

TEST(ConfigParse, UnknownKeysSuggestTheNearestAtEveryLevel) {
  EXPECT_THAT(error_of({{"zero_optimisation", {{"stage", 1}}}}),
              HasSubstr("[config] cfg.json: unknown key 'zero_optimisation' (did you mean 'zero_optimization'?)"));
  EXPECT_THAT(error_of({{"optimizer", {{"typ", "Adam"}}}}),
              HasSubstr("unknown key 'optimizer.typ' (did you mean 'optimizer.type'?)"));
  EXPECT_THAT(error_of({{"optimizer", {{"params", {{"betass", {0.9, 0.9}}}}}}}),
              HasSubstr("unknown key 'optimizer.params.betass' (did you mean 'optimizer.params.betas'?)"));
  EXPECT_THAT(error_of({{"scheduler", {{"parms", json::object()}}}}),
              HasSubstr("unknown key 'scheduler.parms' (did you mean 'scheduler.params'?)"));
  EXPECT_THAT(error_of({{"zero_optimization", {{"stgae", 1}}}}),
              HasSubstr("unknown key 'zero_optimization.stgae' (did you mean 'zero_optimization.stage'?)"));
  EXPECT_THAT(error_of({{"zero_optimization", {{"offload_param", {{"devise", "none"}}}}}}),
              HasSubstr("unknown key 'zero_optimization.offload_param.devise' (did you mean "
                        "'zero_optimization.offload_param.device'?)"));
  EXPECT_THAT(error_of({{"bf16", {{"enable", true}}}}), HasSubstr("(did you mean 'bf16.enabled'?)"));
  EXPECT_THAT(error_of({{"fp16", {{"loss_scal", 0}}}}), HasSubstr("(did you mean 'fp16.loss_scale'?)"));
  EXPECT_THAT(error_of({{"model", {{"hiden", {1}}}}}), HasSubstr("(did you mean 'model.hidden'?)"));
  EXPECT_THAT(error_of({{"data", {{"datset", "mnist"}}}}), HasSubstr("(did you mean 'data.dataset'?)"));
  EXPECT_THAT(error_of({{"run", {{"epoch", 1}}}}), HasSubstr("(did you mean 'run.epochs'?)"));
  // Nothing close: the allowed keys are listed instead.
  EXPECT_THAT(error_of({{"run", {{"zzzzzzzz", 1}}}}),
              HasSubstr("unknown key 'run.zzzzzzzz' (allowed in 'run': dir, epochs, max_steps"));
  EXPECT_THAT(error_of({{"qqqqqqqqqq", 1}}), HasSubstr("unknown key 'qqqqqqqqqq' (allowed: train_batch_size"));
}

TEST(ConfigParse, WrongTypes) {
  EXPECT_THAT(error_of({{"train_batch_size", "64"}}),
              HasSubstr("[config] cfg.json: 'train_batch_size' must be a positive integer, got \"64\""));
  EXPECT_THAT(error_of({{"train_batch_size", 6.5}}), HasSubstr("must be a positive integer, got 6.5"));
  EXPECT_THAT(error_of({{"seed", -1}}), HasSubstr("'seed' must be a non-negative integer, got -1"));
  EXPECT_THAT(error_of({{"wall_clock_breakdown", 1}}),
              HasSubstr("'wall_clock_breakdown' must be true or false, got 1"));
  EXPECT_THAT(error_of({{"optimizer", 5}}), HasSubstr("'optimizer' must be an object, got 5"));
  EXPECT_THAT(error_of({{"optimizer", {{"params", {{"lr", "fast"}}}}}}),
              HasSubstr("'optimizer.params.lr' must be a number in (0, 3.4e+38], got \"fast\""));
  EXPECT_THAT(error_of({{"optimizer", {{"params", {{"betas", 0.9}}}}}}),
              HasSubstr("'optimizer.params.betas' must be a list of two numbers in [0, 1), got 0.9"));
  EXPECT_THAT(error_of({{"optimizer", {{"params", {{"betas", {0.9}}}}}}}), HasSubstr("got [0.9]"));
  EXPECT_THAT(error_of({{"scheduler", {{"params", {1, 2}}}}}), HasSubstr("'scheduler.params' must be an object"));
  EXPECT_THAT(error_of({{"model", {{"hidden", {64, "x"}}}}}),
              HasSubstr("'model.hidden' must be a list of positive integers, got [64,\"x\"]"));
  EXPECT_THAT(error_of({{"data", {{"dir", ""}}}}), HasSubstr("'data.dir' must be a non-empty string"));
  EXPECT_THAT(error_of({{"run", {{"eval_at_end", "yes"}}}}), HasSubstr("'run.eval_at_end' must be true or false"));
  EXPECT_THAT(error_of(json::array()), HasSubstr("'<top level>' must be an object"));
}

TEST(ConfigParse, OutOfRange) {
  EXPECT_THAT(error_of({{"zero_optimization", {{"stage", 4}}}}),
              HasSubstr("'zero_optimization.stage' must be an integer in 0..3, got 4"));
  EXPECT_THAT(error_of({{"zero_optimization", {{"stage", -1}}}}), HasSubstr("got -1"));
  EXPECT_THAT(error_of({{"optimizer", {{"params", {{"lr", 0}}}}}}),
              HasSubstr("'optimizer.params.lr' must be a number in (0, 3.4e+38], got 0"));
  EXPECT_THAT(error_of({{"optimizer", {{"params", {{"betas", {0.9, 1.0}}}}}}}), HasSubstr("got [0.9,1.0]"));
  EXPECT_THAT(error_of({{"optimizer", {{"params", {{"betas", {-0.1, 0.9}}}}}}}), HasSubstr("betas"));
  EXPECT_THAT(error_of({{"optimizer", {{"params", {{"eps", 0.0}}}}}}),
              HasSubstr("'optimizer.params.eps' must be a number in (0, 3.4e+38]"));
  EXPECT_THAT(error_of({{"optimizer", {{"params", {{"weight_decay", -0.1}}}}}}),
              HasSubstr("'optimizer.params.weight_decay' must be a number in [0, 3.4e+38], got -0.1"));
  EXPECT_THAT(error_of({{"gradient_clipping", -1}}), HasSubstr("'gradient_clipping' must be a non-negative number"));
  EXPECT_THAT(error_of({{"train_micro_batch_size_per_gpu", 0}}),
              HasSubstr("'train_micro_batch_size_per_gpu' must be a positive integer, got 0"));
  EXPECT_THAT(error_of({{"gradient_accumulation_steps", -2}}), HasSubstr("got -2"));
  EXPECT_THAT(error_of({{"run", {{"epochs", 0}}}}), HasSubstr("'run.epochs' must be a positive number, got 0"));
  EXPECT_THAT(error_of({{"run", {{"comm_timeout_s", -5}}}}), HasSubstr("'run.comm_timeout_s' must be a number >= 0.1"));
  // A timeout no healthy peer can meet is refused, not blamed on a peer later (issue 31, case 13).
  EXPECT_THAT(error_of({{"run", {{"comm_timeout_s", 1e-3}}}}),
              HasSubstr("'run.comm_timeout_s' must be a number >= 0.1, got 0.001"));
  EXPECT_THAT(error_of({{"run", {{"comm_backend", "gloo"}}}}),
              HasSubstr("'run.comm_backend' must be one of auto, local, mpi, shm, nccl, got \"gloo\""));
  EXPECT_THAT(error_of({{"run", {{"bf16_products", "fast"}}}}),
              HasSubstr("'run.bf16_products' must be one of auto, native, f32, got \"fast\""));
  EXPECT_THAT(error_of({{"model", {{"activation", "relu6"}}}}),
              HasSubstr("'model.activation' must be one of relu, gelu (did you mean \"relu\"?), got \"relu6\""));
  EXPECT_THAT(error_of({{"data", {{"dataset", "imagenet"}}}}), HasSubstr("one of mnist, fashion-mnist, cifar10"));
  EXPECT_THAT(error_of({{"data", {{"train_limit", -1}}}}),
              HasSubstr("'data.train_limit' must be a non-negative integer"));
  EXPECT_THAT(error_of({{"scheduler", {{"type", "WarmupCosine"}}}}), HasSubstr("did you mean \"WarmupCosineLR\"?"));
}

TEST(ConfigParse, MixedPrecisionKeysAsDeepSpeed) {
  Config c = parse(json{{"fp16",
                         {{"enabled", true},
                          {"initial_scale_power", 12},
                          {"hysteresis", 3},
                          {"loss_scale_window", 50},
                          {"min_loss_scale", 0.5}}},
                        {"communication_data_type", "fp32"},
                        {"data_types", {{"grad_accum_dtype", "fp32"}}}});
  EXPECT_TRUE(c.fp16.enabled);
  EXPECT_EQ(c.fp16.initial_scale_power, 12);
  EXPECT_EQ(c.fp16.hysteresis, 3);
  EXPECT_EQ(c.fp16.loss_scale_window, 50);
  EXPECT_EQ(c.fp16.min_loss_scale, 0.5);
  EXPECT_EQ(c.fp16.loss_scale, 0);
  EXPECT_EQ(c.communication_data_type, "fp32");
  EXPECT_EQ(c.grad_accum_dtype, "fp32");
  Config d = parse(json::object());  // DeepSpeed's defaults
  EXPECT_FALSE(d.fp16.enabled);
  EXPECT_EQ(d.fp16.initial_scale_power, 16);
  EXPECT_EQ(d.fp16.loss_scale_window, 1000);
  EXPECT_EQ(d.fp16.hysteresis, 2);
  EXPECT_EQ(d.fp16.min_loss_scale, 1);
  EXPECT_EQ(d.communication_data_type, "");
  EXPECT_THAT(error_of({{"fp16", {{"enabled", true}}}, {"bf16", {{"enabled", true}}}}), HasSubstr("choose one"));
  EXPECT_THAT(error_of({{"communication_data_type", "fp8"}}), HasSubstr("one of fp32, fp16, bf16"));
  EXPECT_THAT(error_of({{"data_types", {{"grad_accum_dtyp", "fp32"}}}}),
              HasSubstr("did you mean 'data_types.grad_accum_dtype'"));
}

// offload_optimizer / offload_param device "auto" (Note [budget choice]): accepted with a folder
// to offload to; what it becomes is decided against run.memory_budget_mb before training.
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

// ZeRO++ (Note [ZeRO++]): DeepSpeed's keys, each checked against the stage it needs.
TEST(ConfigParse, ZeroPlusPlusKeys) {
  const Config c = parse({{"zero_optimization",
                           {{"stage", 3},
                            {"zero_quantized_weights", true},
                            {"zero_quantized_gradients", true},
                            {"zero_quantized_gradients_bits", 8},
                            {"zero_hpz_partition_size", 2}}}});
  EXPECT_TRUE(c.zero.zero_quantized_weights);
  EXPECT_TRUE(c.zero.zero_quantized_gradients);
  EXPECT_EQ(c.zero.zero_quantized_gradients_bits, 8);
  EXPECT_EQ(c.zero.zero_hpz_partition_size, 2);
  EXPECT_EQ(parse(json::object()).zero.zero_quantized_gradients_bits, 4);  // DeepSpeed's int4
  EXPECT_THAT(error_of({{"zero_optimization", {{"stage", 2}, {"zero_quantized_weights", true}}}}),
              HasSubstr("'zero_optimization.zero_quantized_weights' needs 'zero_optimization.stage' 3"));
  EXPECT_THAT(error_of({{"zero_optimization", {{"stage", 1}, {"zero_hpz_partition_size", 2}}}}),
              HasSubstr("'zero_optimization.zero_hpz_partition_size' needs 'zero_optimization.stage' 3"));
  EXPECT_EQ(parse({{"zero_optimization", {{"stage", 1}, {"zero_hpz_partition_size", 1}}}}).zero.zero_hpz_partition_size,
            1);  // 1 is off
  EXPECT_THAT(error_of({{"zero_optimization", {{"zero_quantized_gradients", true}}}}),
              HasSubstr("'zero_optimization.zero_quantized_gradients' needs 'zero_optimization.stage' 1, 2 or 3"));
  EXPECT_THAT(error_of({{"zero_optimization", {{"stage", 3}, {"zero_quantized_gradients_bits", 6}}}}),
              HasSubstr("(allowed: 4 or 8)"));
  EXPECT_THAT(error_of({{"zero_optimization", {{"stage", 3}, {"zero_quantized_gradients_bits", 16}}}}),
              HasSubstr("zero_quantized_gradients_bits"));
  EXPECT_THAT(error_of({{"zero_optimization", {{"stage", 3}, {"zero_hpz_partition_size", 0}}}}),
              HasSubstr("zero_hpz_partition_size"));
  EXPECT_THAT(error_of({{"zero_optimization", {{"stage", 3}, {"zero_quantized_weights", "yes"}}}}),
              HasSubstr("zero_quantized_weights"));
}

TEST(ConfigParse, UnsupportedFeaturesSaySo) {
  EXPECT_THAT(error_of({{"zero_optimization", {{"offload_param", {{"device", "nvme"}, {"nvme_path", "/x"}}}}}}),
              HasSubstr("'zero_optimization.offload_param.device' = \"nvme\" needs 'zero_optimization.stage' 3 "
                        "(below it every rank holds all parameters), got 0"));
  EXPECT_EQ(parse({{"zero_optimization", {{"stage", 3}, {"offload_param", {{"device", "nvme"}, {"nvme_path", "/x"}}}}}})
                .zero.offload_param.device,
            "nvme");
  EXPECT_THAT(error_of({{"zero_optimization", {{"offload_optimizer", {{"device", "nvme"}}}}}}),
              HasSubstr("'zero_optimization.offload_optimizer.device' = \"nvme\" needs "
                        "'zero_optimization.offload_optimizer.nvme_path'"));
  EXPECT_THAT(error_of({{"zero_optimization",
                         {{"offload_optimizer", {{"device", "nvme"}, {"nvme_path", "/x"}, {"ratio", 0.5}}}}}}),
              HasSubstr("'zero_optimization.offload_optimizer.ratio' = 0.5 is not supported yet"));
  EXPECT_THAT(error_of({{"aio", {{"use_gds", true}}}}), HasSubstr("'aio.use_gds' = true needs GPUDirect Storage"));
  EXPECT_THAT(error_of({{"aio", {{"queue_depth", 0}}}}), HasSubstr("aio.queue_depth"));
  EXPECT_THAT(error_of({{"zero_optimization", {{"offload_param", {{"device", "gpu"}}}}}}),
              HasSubstr("must be one of none, cpu, nvme"));
  EXPECT_THAT(error_of({{"zero_optimization", {{"reduce_scatter", false}}}}),
              HasSubstr("= false is not supported yet"));
  EXPECT_THAT(error_of({{"prescale_gradients", true}}), HasSubstr("'prescale_gradients' = true is not supported yet"));
  EXPECT_THAT(error_of({{"activation_checkpointing", {{"cpu_checkpointing", true}}}}),
              HasSubstr("'activation_checkpointing.cpu_checkpointing' = true is not supported"));
}

// DeepSpeed's offload and aio keys land in the config (a ZeRO-Infinity config runs unchanged).
TEST(ConfigParse, OffloadAndAioKeys) {
  Config c = parse(json{{"zero_optimization",
                         {{"stage", 3},
                          {"sub_group_size", 1e6},
                          {"offload_optimizer",
                           {{"device", "nvme"},
                            {"nvme_path", "/local"},
                            {"buffer_count", 5},
                            {"pin_memory", true},
                            {"fast_init", false},
                            {"super_offload", true}}},
                          {"offload_param", {{"device", "cpu"}, {"pin_memory", true}}}}},
                        {"aio",
                         {{"block_size", 262144},
                          {"queue_depth", 16},
                          {"thread_count", 2},
                          {"single_submit", true},
                          {"overlap_events", false}}}});
  EXPECT_EQ(c.zero.offload_optimizer.device, "nvme");
  EXPECT_EQ(c.zero.offload_optimizer.nvme_path, "/local");
  EXPECT_EQ(c.zero.offload_optimizer.buffer_count, 5);
  EXPECT_TRUE(c.zero.offload_optimizer.super_offload);
  EXPECT_FALSE(parse(json::object()).zero.offload_optimizer.super_offload);
  EXPECT_EQ(c.zero.offload_param.device, "cpu");
  EXPECT_EQ(c.zero.sub_group_size, 1000000);
  EXPECT_EQ(c.aio.block_size, 262144);
  EXPECT_EQ(c.aio.queue_depth, 16);
  EXPECT_EQ(c.aio.intra_op_parallelism, 2);
  EXPECT_TRUE(c.aio.single_submit);
  EXPECT_FALSE(c.aio.overlap_events);
  EXPECT_EQ(parse(json::object()).zero.offload_optimizer.device, "none");
}

TEST(ConfigParse, TransformerKeys) {
  Config c = parse(json{{"sparse_gradients", true},
                        {"activation_checkpointing", {{"number_checkpoints", 2}, {"profile", true}}},
                        {"model", {{"type", "gpt"}, {"n_layer", 2}, {"n_head", 4}, {"n_embd", 64}, {"block_size", 32}}},
                        {"data", {{"dataset", "tokens"}, {"dir", "data/tokens/x"}, {"eval_every", 50}}}});
  EXPECT_TRUE(c.sparse_gradients);
  EXPECT_TRUE(c.activation_checkpointing.enabled);
  EXPECT_EQ(c.activation_checkpointing.number_checkpoints, 2);
  EXPECT_EQ(c.model.type, "gpt");
  EXPECT_EQ(c.model.as<apps::TransformerKeys>().n_embd, 64);
  EXPECT_EQ(c.data.eval_every, 50);
  EXPECT_FALSE(parse(json::object()).activation_checkpointing.enabled);
  EXPECT_THAT(error_of({{"model", {{"type", "gpt"}, {"n_head", 5}, {"n_embd", 64}}}}),
              HasSubstr("model.n_embd 64 is not a multiple of model.n_head 5 (nearest valid n_embd: 65)"));
  // Past uint16 token ids (Llama 3's 128,256, Qwen's 151,936): uint32 shards hold them; i32 ids cap it.
  EXPECT_EQ(parse({{"model", {{"type", "gpt"}, {"vocab_size", 151936}}}}).model.as<apps::TransformerKeys>().vocab_size,
            151936);
  EXPECT_THAT(error_of({{"model", {{"type", "gpt"}, {"vocab_size", (1 << 24) + 1}}}}), HasSubstr("model.vocab_size"));
}

// The Llama family's keys: defaults, ranges and the checks of its entry (apps) before step 1.
TEST(ConfigParse, LlamaKeys) {
  const apps::LlamaKeys d = parse({{"model", {{"type", "llama"}}}}).model.as<apps::LlamaKeys>();
  EXPECT_EQ(d.n_kv_head, 0);  // n_head
  EXPECT_EQ(d.intermediate_size, 0);
  EXPECT_EQ(d.rope_theta, 10000.0);
  EXPECT_FALSE(d.tie_word_embeddings);
  const Config c = parse({{"model",
                           {{"type", "llama"},
                            {"n_kv_head", 2},
                            {"intermediate_size", 1536},
                            {"rope_theta", 500000.0},
                            {"rms_norm_eps", 1e-5},
                            {"tie_word_embeddings", true},
                            {"qkv_bias", true}}}});
  const apps::LlamaKeys& l = c.model.as<apps::LlamaKeys>();
  EXPECT_EQ(l.n_kv_head, 2);
  EXPECT_EQ(l.intermediate_size, 1536);
  EXPECT_EQ(l.rope_theta, 500000.0);
  EXPECT_TRUE(l.qkv_bias);
  for (const char* key : {"intermediate_size", "n_kv_head"})
    EXPECT_THAT(error_of({{"model", {{"type", "llama"}, {key, 0}}}}), HasSubstr(std::string("model.") + key));
  EXPECT_THAT(error_of({{"model", {{"type", "llama"}, {"rope_theta", -1.0}}}}), HasSubstr("model.rope_theta"));
  EXPECT_THAT(error_of({{"model", {{"type", "llama"}, {"rms_norm_eps", 0.0}}}}), HasSubstr("model.rms_norm_eps"));
}

// Note [model registry]: a family owns its keys; another family's key is named as such, and the
// keys of the type asked for are listed.
TEST(ConfigParse, AFamilyTakesItsOwnKeysOnly) {
  EXPECT_THAT(error_of({{"model", {{"type", "gpt"}, {"n_kv_head", 2}}}}),
              HasSubstr("'model.n_kv_head' is a key of model.type llama, not of model.type gpt (its keys: type, "
                        "init_from, init_strict, vocab_size, block_size, n_layer, n_head, n_embd, dropout)"));
  EXPECT_THAT(error_of({{"model", {{"hidden", {8}}, {"n_layer", 2}}}}),
              HasSubstr("'model.n_layer' is a key of model.type gpt, not of model.type mlp"));
  EXPECT_THAT(error_of({{"model", {{"type", "cnn"}, {"zzz", 1}}}}),
              HasSubstr("unknown key 'model.zzz' (allowed in 'model' for model.type cnn: type, init_from, init_strict, channels"));
  // The keys of a type come with it: defaults where the section is absent.
  EXPECT_EQ(parse(json::object()).model.as<apps::MlpKeys>().input_dim, 784);
  EXPECT_THROW(parse(json::object()).model.as<apps::CnnKeys>(), Error);
}

// Globs of llm.c shards instead of data.dir's train_*.bin / val_*.bin; matched when the task opens them.
TEST(ConfigParse, TokenShardGlobs) {
  EXPECT_EQ(parse(json::object()).data.train_files, "");
  Config c = parse(json{{"data",
                         {{"dataset", "tokens"},
                          {"train_files", "data/fineweb10B/fineweb_train_*.bin"},
                          {"val_files", "data/fineweb10B/fineweb_val_*.bin"}}}});
  EXPECT_EQ(c.data.train_files, "data/fineweb10B/fineweb_train_*.bin");
  EXPECT_EQ(c.data.val_files, "data/fineweb10B/fineweb_val_*.bin");
  EXPECT_THAT(error_of({{"data", {{"dataset", "mnist"}, {"train_files", "x_*.bin"}}}}),
              HasSubstr("'data.train_files' names token shards, but data.dataset is 'mnist'"));
  EXPECT_THAT(error_of({{"data", {{"dataset", "tokens"}, {"val_files", 3}}}}), HasSubstr("data.val_files"));
}

TEST(ConfigParse, NullBatchKeysMeanDerive) {
  Config c = parse(json{{"train_batch_size", nullptr}, {"train_micro_batch_size_per_gpu", 8}});
  EXPECT_EQ(c.train_batch_size, 0);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 8);
}

TEST(ConfigNearest, DistanceThreshold) {
  std::vector<std::string> keys = {"stage", "overlap_comm", "reduce_bucket_size"};
  EXPECT_EQ(nearest("stgae", keys), "stage");  // distance 2 (short keys allow 2)
  EXPECT_EQ(nearest("STAGE", keys), "stage");  // case does not count
  EXPECT_EQ(nearest("reduce_bucket_sz", keys), "reduce_bucket_size");
  EXPECT_EQ(nearest("reduce_bkt_sise", keys), "reduce_bucket_size");  // distance 4 <= 15/3
  EXPECT_EQ(nearest("rduce_bkt_sise", keys), "");                     // distance 5 > 14/3
  EXPECT_EQ(nearest("stg", keys), "stage");                           // short key: distance 2 allowed
  EXPECT_EQ(nearest("sxgx", keys), "");                               // distance 3 > 2
  EXPECT_EQ(nearest("xyzzy", keys), "");
  EXPECT_EQ(nearest("", keys), "");
  EXPECT_EQ(nearest("stage", {}), "");
}

}  // namespace
}  // namespace zt::config
