// Config parsing: DeepSpeed's keys with DeepSpeed's meanings, plus our model/data/run sections.
#include "zt/config/config.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "auto_values.h"
#include "json_check.h"
#include "zt/comm/backends.h"
#include "zt/core/error.h"
#include "zt/core/strings.h"

namespace zt::config {
namespace {

using detail::Section;

// offload_optimizer or offload_param: every key DeepSpeed has, checked.
void parse_offload(const Section& s, OffloadConfig& o) {
  s.allow({"device", "pin_memory", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "fast_init", "ratio",
           "pipeline_read", "pipeline_write", "pipeline", "super_offload"});
  s.read_choice("device", o.device, {"none", "cpu", "nvme", "auto"});
  s.read_path("nvme_path", o.nvme_path, true);
  ZT_CHECK_AS(ErrorKind::config, o.device != "nvme" || !o.nvme_path.empty(), "[config] ", s.source(), ": '",
              s.path("device"), "' = \"nvme\" needs '", s.path("nvme_path"), "' (a folder on a local disk)");
  // "auto": run.memory_budget_mb decides (Note [budget choice] in zero/placement.cpp); nvme when it must.
  ZT_CHECK_AS(ErrorKind::config, o.device != "auto" || !o.nvme_path.empty(), "[config] ", s.source(), ": '",
              s.path("device"), "' = \"auto\" needs '", s.path("nvme_path"),
              "' (where to offload when the budget needs it)");
  s.read_bool("pin_memory", o.pin_memory);
  s.read_int("buffer_count", o.buffer_count, 1, 64);
  s.read_bool("fast_init", o.fast_init);
  s.read_bool("super_offload", o.super_offload);
  s.read_number("ratio", o.ratio, 0, false, 1, false);
  ZT_CHECK_AS(ErrorKind::config, o.ratio == 1.0 || o.device == "none", "[config] ", s.source(), ": '", s.path("ratio"),
              "' = ", o.ratio, " is not supported yet (allowed: 1, every state offloaded)");
  bool b = false;
  int64_t i = 0;
  s.read_int("buffer_size", i, 1);
  s.read_int("max_in_cpu", i, 0);
  s.read_bool("pipeline_read", b);
  s.read_bool("pipeline_write", b);
  s.read_bool("pipeline", b);
}

void parse_aio(const Section& s, AioConfig& a) {
  s.allow({"block_size", "queue_depth", "intra_op_parallelism", "thread_count", "single_submit", "overlap_events",
           "use_gds"});
  s.read_int("block_size", a.block_size, 4096, int64_t(1) << 30);
  s.read_int("queue_depth", a.queue_depth, 1, 4096);
  s.read_int("thread_count", a.intra_op_parallelism, 1, 1024);  // the older name
  s.read_int("intra_op_parallelism", a.intra_op_parallelism, 1, 1024);
  s.read_bool("single_submit", a.single_submit);
  s.read_bool("overlap_events", a.overlap_events);
  bool gds = false;
  s.read_bool("use_gds", gds);
  ZT_CHECK_AS(ErrorKind::config, !gds, "[config] ", s.source(), ": '", s.path("use_gds"),
              "' = true needs GPUDirect Storage, which a CPU run has not (allowed: false)");
}

void parse_zero(const Section& s, ZeroConfig& z) {
  s.allow({"stage", "overlap_comm", "contiguous_gradients", "reduce_bucket_size", "allgather_bucket_size",
           "stage3_prefetch_bucket_size", "stage3_max_live_parameters", "stage3_param_persistence_threshold",
           "stage3_gather_fp16_weights_on_model_save", "offload_optimizer", "offload_param", "reduce_scatter", "allgather_partitions", "round_robin_gradients",
           "sub_group_size", "stage3_max_reuse_distance", "stage3_gather_16bit_weights_on_model_save",
           "zero_quantized_weights", "zero_quantized_gradients", "zero_quantized_gradients_bits",
           "zero_hpz_partition_size"});
  s.read_int("stage", z.stage, 0, 3);
  s.read_bool("overlap_comm", z.overlap_comm);
  s.read_bool("contiguous_gradients", z.contiguous_gradients);
  s.read_int("reduce_bucket_size", z.reduce_bucket_size, 1);
  s.read_int("allgather_bucket_size", z.allgather_bucket_size, 1);
  s.read_int("stage3_prefetch_bucket_size", z.stage3_prefetch_bucket_size, 0);
  s.read_int("stage3_max_live_parameters", z.stage3_max_live_parameters, 0);
  s.read_int("stage3_param_persistence_threshold", z.stage3_param_persistence_threshold, 0);
  s.read_int("stage3_max_reuse_distance", z.stage3_max_reuse_distance, 0);
  s.read_section("offload_optimizer", [&](const Section& o) { parse_offload(o, z.offload_optimizer); });
  s.read_section("offload_param", [&](const Section& o) { parse_offload(o, z.offload_param); });
  ZT_CHECK_AS(ErrorKind::config, z.offload_param.device != "nvme" || z.stage == 3, "[config] ", s.source(), ": '",
              s.path("offload_param.device"), "' = \"nvme\" needs '", s.path("stage"),
              "' 3 (below it every rank holds all parameters), got ", z.stage);
  s.read_bool("zero_quantized_weights", z.zero_quantized_weights);
  s.read_bool("zero_quantized_gradients", z.zero_quantized_gradients);
  s.read_int("zero_quantized_gradients_bits", z.zero_quantized_gradients_bits, 4, 8);
  ZT_CHECK_AS(ErrorKind::config, z.zero_quantized_gradients_bits == 4 || z.zero_quantized_gradients_bits == 8,
              "[config] ", s.source(), ": '", s.path("zero_quantized_gradients_bits"), "' = ",
              z.zero_quantized_gradients_bits, " is not a width we quantize to (allowed: 4 or 8)");
  s.read_int("zero_hpz_partition_size", z.zero_hpz_partition_size, 1);
  auto needs_stage3 = [&](const char* key, bool on) {
    ZT_CHECK_AS(ErrorKind::config, !on || z.stage == 3, "[config] ", s.source(), ": '", s.path(key), "' needs '",
                s.path("stage"), "' 3 (it changes the parameter all-gathers), got ", z.stage);
  };
  needs_stage3("zero_quantized_weights", z.zero_quantized_weights);
  needs_stage3("zero_hpz_partition_size", z.zero_hpz_partition_size > 1);
  ZT_CHECK_AS(ErrorKind::config, !z.zero_quantized_gradients || z.stage >= 1, "[config] ", s.source(), ": '",
              s.path("zero_quantized_gradients"), "' needs '", s.path("stage"),
              "' 1, 2 or 3 (it quantizes the reduce-scatter), got ", z.stage);
  // DeepSpeed keys whose only value we implement is DeepSpeed's default behaviour.
  for (const char* key : {"reduce_scatter", "allgather_partitions"}) {
    bool on = true;
    s.read_bool(key, on);
    ZT_CHECK_AS(ErrorKind::config, on, "[config] ", s.source(), ": '", s.path(key),
                "' = false is not supported yet (allowed: true)");
  }
  // Accepted and validated; tuning knobs our engine does not need.
  bool b = false;
  s.read_bool("round_robin_gradients", b);
  s.read_int("sub_group_size", z.sub_group_size, 1);
  s.read_bool("stage3_gather_16bit_weights_on_model_save", b);
  s.read_bool("stage3_gather_fp16_weights_on_model_save", b);  // its older name
}

// DeepSpeed's monitor sections; tensorboard and csv_monitor write files, the others are named.
void parse_monitor(const Section& s, MonitorConfig::Writer& w) {
  s.allow({"enabled", "output_path", "job_name"});
  s.read_bool("enabled", w.enabled);
  s.read_path("output_path", w.output_path, /*allow_empty=*/true);
  s.read_path("job_name", w.job_name);
}

// The optimizer runs in fp32: a larger value would become infinite there.
constexpr double kMaxFloat = 3.4e38;

void parse_optimizer(const Section& s, OptimizerConfig& o) {
  s.allow({"type", "params"});
  std::string written = o.type;
  s.read_choice("type", written, {"Adam", "AdamW", "SGD"}, true);
  o.type = written;
  const bool adam = written != "SGD";
  o.weight_decay = written == "AdamW" ? 0.01 : 0.0;  // PyTorch's defaults
  bool adam_w_mode = true;                           // DeepSpeed's default for type Adam
  s.read_section("params", [&](const Section& p) {
    p.allow({"lr", "betas", "eps", "weight_decay", "momentum", "nesterov", "torch_adam", "adam_w_mode"});
    for (const char* key : {"betas", "eps", "torch_adam", "adam_w_mode"})
      ZT_CHECK_AS(ErrorKind::config, adam || !p.has(key), "[config] ", p.source(), ": '", p.path(key),
                  "' applies to Adam/AdamW, not to optimizer type ", written);
    for (const char* key : {"momentum", "nesterov"})
      ZT_CHECK_AS(ErrorKind::config, !adam || !p.has(key), "[config] ", p.source(), ": '", p.path(key),
                  "' applies to SGD, not to optimizer type ", written);
    p.read_number("lr", o.lr, 0, true, kMaxFloat, false);
    if (p.has("betas")) {
      const auto& b = p.value("betas");
      const char* what = "a list of two numbers in [0, 1)";
      if (!b.is_array() || b.size() != 2 || !b[0].is_number() || !b[1].is_number())
        detail::bad_value(p.source(), p.path("betas"), what, b);
      o.beta1 = b[0].get<double>();
      o.beta2 = b[1].get<double>();
      if (!(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1))
        detail::bad_value(p.source(), p.path("betas"), what, b);
    }
    p.read_number("eps", o.eps, 0, true, kMaxFloat, false);
    p.read_number("weight_decay", o.weight_decay, 0, false, kMaxFloat, false);
    p.read_number("momentum", o.momentum, 0, false, kMaxFloat, false);
    p.read_bool("nesterov", o.nesterov);
    ZT_CHECK_AS(ErrorKind::config, !o.nesterov || o.momentum > 0, "[config] ", p.source(), ": '", p.path("nesterov"),
                "' = true needs '", p.path("momentum"), "' > 0");
    bool torch_adam = false;  // accepted: our Adam is the same algorithm either way
    p.read_bool("torch_adam", torch_adam);
    p.read_bool("adam_w_mode", adam_w_mode);
    ZT_CHECK_AS(ErrorKind::config, written != "AdamW" || adam_w_mode, "[config] ", p.source(), ": '",
                p.path("adam_w_mode"),
                "' = false contradicts optimizer type AdamW (use type Adam for L2 weight decay)");
  });
  // As in DeepSpeed, type Adam with adam_w_mode (the default) decays weights decoupled (AdamW).
  if (written == "Adam" && adam_w_mode) o.type = "AdamW";
}

void parse_scheduler(const Section& s, SchedulerConfig& sc) {
  s.allow({"type", "params"});
  // The same list as optim::schedule_types(), which validates the params.
  s.read_choice("type", sc.type, {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"});
  if (s.has("params")) {
    const auto& p = s.value("params");
    if (!p.is_object()) detail::bad_value(s.source(), s.path("params"), "an object", p);
    sc.params = p;
  }
}

void parse_fp16(const Section& s, Fp16Config& f) {
  s.allow({"enabled", "auto_cast", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
           "consecutive_hysteresis", "min_loss_scale"});
  s.read_bool("enabled", f.enabled);
  s.read_bool("auto_cast", f.auto_cast);
  s.read_number("loss_scale", f.loss_scale, 0, false);
  s.read_int("initial_scale_power", f.initial_scale_power, 0, 120);
  s.read_int("loss_scale_window", f.loss_scale_window, 1);
  s.read_int("hysteresis", f.hysteresis, 1);
  s.read_bool("consecutive_hysteresis", f.consecutive_hysteresis);
  s.read_number("min_loss_scale", f.min_loss_scale, 0, true);
}

void parse_data(const Section& s, DataConfig& d) {
  s.allow({"dataset", "dir", "shuffle", "train_limit", "test_limit", "pad_to", "seq_len", "eval_every", "eval_batches",
           "mask_prob", "train_files", "val_files"});
  s.read_choice("dataset", d.dataset, {"mnist", "fashion-mnist", "cifar10", "tokens", "classify"});
  s.read_int("seq_len", d.seq_len, 0, 1 << 20);
  s.read_int("eval_every", d.eval_every, 0);
  s.read_int("eval_batches", d.eval_batches, 1);
  s.read_number("mask_prob", d.mask_prob, 0, true, 1, false);
  if (!s.has("dir")) d.dir = "data/" + d.dataset;  // scripts/setup.sh puts each dataset there
  s.read_path("dir", d.dir);
  for (auto [key, out] : {std::pair{"train_files", &d.train_files}, std::pair{"val_files", &d.val_files}}) {
    s.read_path(key, *out, /*allow_empty=*/true);  // "" = data.dir; globbed when the task opens the shards
    ZT_CHECK_AS(ErrorKind::config, out->empty() || d.dataset == "tokens", "[config] ", s.source(), ": 'data.", key,
                "' names token shards, but data.dataset is '", d.dataset, "' (set data.dataset tokens)");
  }
  s.read_bool("shuffle", d.shuffle);
  s.read_int("train_limit", d.train_limit, 0);
  s.read_int("test_limit", d.test_limit, 0);
  const int64_t stored = dataset_image_shape(d.dataset).size;
  s.read_int("pad_to", d.pad_to, 0, int64_t(1) << 20);
  ZT_CHECK_AS(ErrorKind::config, d.pad_to == 0 || d.pad_to >= stored, "[config] ", s.source(), ": 'data.pad_to' ",
              d.pad_to, " is smaller than ", d.dataset, "'s ", stored, "x", stored,
              " images (allowed: 0 = as stored, or >= ", stored, ")");
}

void parse_run(const Section& s, RunConfig& r) {
  s.allow({"dir", "epochs", "max_steps", "threads", "pin_threads", "comm_backend", "comm_timeout_s",
           "check_collectives", "memory_budget_mb", "eval_at_end", "resume", "max_consecutive_skipped_steps",
           "save_weights", "bf16_products", "strategy", "parameter_servers", "device", "device_memory_mb",
           "per_device_train_batch_size"});
  s.read_int("per_device_train_batch_size", r.per_device_train_batch_size, 1);
  s.read_path("resume", r.resume);
  s.read_path("dir", r.dir);
  s.read_number("epochs", r.epochs, 0, true);
  s.read_int("max_steps", r.max_steps, 0);
  s.read_int("threads", r.threads, 0, kMaxThreads);
  s.read_bool("pin_threads", r.pin_threads);
  s.read_choice("comm_backend", r.comm_backend, comm::backend_choices());
  // Below 0.1 s a healthy peer would be blamed for a stall (probe case 13 of issue 31).
  s.read_number("comm_timeout_s", r.comm_timeout_s, 0.1, false);
  s.read_bool("check_collectives", r.check_collectives);
  if (s.has("device")) {  // cuda:K's K is checked against the GPUs present when the run starts
    const auto& v = s.value("device");
    const std::string d = v.is_string() ? v.get<std::string>() : "";
    const bool ok = d == "cpu" || d == "sim" || d == "sim:0" || d == "cuda" ||
                    (d.size() > 5 && d.rfind("cuda:", 0) == 0 &&
                     d.find_first_not_of("0123456789", 5) == std::string::npos && d.size() <= 8);
    if (!ok) detail::bad_value(s.source(), s.path("device"), "one of cpu, sim, sim:0, cuda, cuda:K", v);
    r.device = d == "sim:0" ? "sim" : d;  // every line calls the one sim device sim:0
  }
  s.read_int("memory_budget_mb", r.memory_budget_mb, 0, kMaxMemoryBudgetMb);
  s.read_int("device_memory_mb", r.device_memory_mb, 0, kMaxMemoryBudgetMb);
  ZT_CHECK_AS(ErrorKind::config, r.device_memory_mb == 0 || r.device != "cpu", "[config] ", s.source(), ": '",
              s.path("device_memory_mb"), "' caps a device's memory, but run.device is cpu (run.memory_budget_mb caps ",
              "the host's)");
  s.read_bool("eval_at_end", r.eval_at_end);
  s.read_bool("save_weights", r.save_weights);
  s.read_choice("bf16_products", r.bf16_products, {"auto", "native", "f32"});
  s.read_int("max_consecutive_skipped_steps", r.max_consecutive_skipped_steps, 0);
  s.read_choice("strategy", r.strategy, {"zero", "parameter_server"});
  if (s.has("parameter_servers")) {  // a bad value names the nearest valid one (the world size bounds it too)
    int64_t v = 0;
    const bool integer = detail::as_int64(s.value("parameter_servers"), v);
    if (!integer || v < 1 || v > std::numeric_limits<int>::max())
      detail::bad_value(s.source(), s.path("parameter_servers"),
                        !integer ? "a positive integer"
                        : v < 1  ? "a positive integer (the nearest valid value is 1)"
                                 : "less than the world size (and than 2^31)",
                        s.value("parameter_servers"));
    r.parameter_servers = int(v);
  }
}

// The parameter server (Note [parameter server]) trains in fp32 or bf16 with its states in memory,
// over point-to-point messages, without checkpoints; each key it cannot honour is one line.
void check_strategy(const Config& c, const std::string& source) {
  if (c.run.strategy != "parameter_server") return;
  auto refuse = [&](bool bad, const char* key, const std::string& value, const char* allowed) {
    ZT_CHECK_AS(ErrorKind::config, !bad, "[config] ", source, ": '", key, "' = ", value,
                " is not available with run.strategy parameter_server (allowed: ", allowed, ")");
  };
  refuse(c.fp16.enabled, "fp16.enabled", "true", "false; bf16.enabled works");
  for (const auto& [key, o] : {std::pair{"zero_optimization.offload_optimizer.device", &c.zero.offload_optimizer},
                               std::pair{"zero_optimization.offload_param.device", &c.zero.offload_param}})
    refuse(o->device == "nvme" || o->device == "auto", key, o->device, "none, cpu");
  refuse(c.sparse_gradients, "sparse_gradients", "true", "false");
  // ZeRO++ quantizes and re-partitions ZeRO's collectives; the servers' messages have none of them.
  refuse(c.zero.zero_quantized_weights, "zero_optimization.zero_quantized_weights", "true", "false");
  refuse(c.zero.zero_quantized_gradients, "zero_optimization.zero_quantized_gradients", "true", "false");
  refuse(c.zero.zero_hpz_partition_size > 1, "zero_optimization.zero_hpz_partition_size",
         std::to_string(c.zero.zero_hpz_partition_size), "1");
  refuse(c.checkpoint.every_steps > 0, "checkpoint.every_steps", std::to_string(c.checkpoint.every_steps), "0");
  refuse(!c.run.resume.empty(), "run.resume", "'" + c.run.resume + "'", "\"\"");
  refuse(c.run.memory_budget_mb > 0, "run.memory_budget_mb", std::to_string(c.run.memory_budget_mb), "0");
  refuse(c.run.comm_backend == "shm" || c.run.comm_backend == "nccl", "run.comm_backend", c.run.comm_backend,
         "auto, mpi; the servers need point-to-point messages");
}

void parse_checkpoint(const Section& s, CheckpointConfig& c) {
  s.allow({"dir", "every_steps", "keep_last", "async"});
  s.read_path("dir", c.dir);
  s.read_int("every_steps", c.every_steps, 0);
  s.read_int("keep_last", c.keep_last, 0);
  if (s.has("async") && s.value("async").is_boolean())
    c.async = s.value("async").get<bool>() ? "true" : "false";
  else
    s.read_choice("async", c.async, {"auto", "true", "false"});
}

}  // namespace

namespace {
struct Family {
  std::string type;
  ModelFamily family;
};
std::vector<Family>& families() {
  static std::vector<Family> f;
  return f;
}
std::vector<std::string>& type_names() {
  static std::vector<std::string> names;
  return names;
}
const Family* family_of(const std::string& type) {
  for (const Family& f : families())
    if (f.type == type) return &f;
  return nullptr;
}

// Note [model registry]: type and init_from here, the rest by the type's family.
void parse_model(const Section& s, ModelConfig& m) {
  if (s.has("type")) {
    const std::vector<std::string>& types = model_types();
    ZT_CHECK_AS(ErrorKind::config, !types.empty(), "[config] ", s.source(),
                ": 'model.type' names a model family, and none is registered in this program");
    s.read_choice("type", m.type, types);
  }
  s.read_path("init_from", m.init_from, /*allow_empty=*/true);  // "" = none
  s.read_bool("init_strict", m.init_strict);
  const Family* f = family_of(m.type);
  std::vector<std::string> known = {"type", "init_from", "init_strict"};
  if (f) known.insert(known.end(), f->family.keys.begin(), f->family.keys.end());
  // A key of another family is named as such, not matched to the nearest key of this one.
  for (const Family& other : families()) {
    if (&other == f) continue;
    for (const std::string& key : other.family.keys)
      ZT_CHECK_AS(ErrorKind::config, !s.has(key) || std::find(known.begin(), known.end(), key) != known.end(),
                  "[config] ", s.source(), ": 'model.", key, "' is a key of model.type ", other.type,
                  ", not of model.type ", m.type, " (its keys: ", join(known), ")");
  }
  s.allow(known, "model.type " + m.type);
  if (f) m.keys = f->family.parse(s);
}

// Note [HF config]: a model section without `type` whose weights are a Hugging Face folder (the
// command's --weights, else model.init_from) takes the family that reads the folder's
// `architectures` and that family's keys from its config.json; the section's own keys override
// them. The resolved section replaces the given one in `raw` too, so a run's saved config stands
// alone (export --format hf reads it back from a checkpoint).
std::string resolve_hf_model(nlohmann::json& resolved, nlohmann::json& raw, const std::string& weights,
                             const std::string& source) {
  nlohmann::json given = resolved.contains("model") ? resolved["model"] : nlohmann::json::object();
  if (!given.is_object() || given.contains("type")) return "";
  std::string folder = weights;
  nlohmann::json hf = detail::read_hf_config(folder);
  if (hf.is_null() && given.contains("init_from") && given["init_from"].is_string()) {
    folder = given["init_from"].get<std::string>();
    hf = detail::read_hf_config(folder);
  }
  if (hf.is_null()) return "";
  const std::string file = folder + "/config.json";
  std::vector<std::string> archs, known;
  if (hf.contains("architectures") && hf["architectures"].is_array())
    for (const auto& a : hf["architectures"])
      if (a.is_string()) archs.push_back(a.get<std::string>());
  for (const Family& f : families())
    for (const std::string& a : f.family.hf_architectures) {
      known.push_back(a);
      if (f.family.from_hf && std::find(archs.begin(), archs.end(), a) != archs.end()) {
        nlohmann::json keys = f.family.from_hf(hf, file);
        for (const auto& [k, v] : given.items()) keys[k] = v;  // the config's keys win
        keys["type"] = f.type;
        resolved["model"] = keys;
        raw["model"] = keys;
        return "model.type " + f.type + " and its keys from " + file + " (" + a + ")";
      }
    }
  ZT_THROW_AS(ErrorKind::config, "[config] ", source, ": model.type is not set and ", file, " has architectures ",
              detail::short_dump(hf.value("architectures", nlohmann::json())), ", none of which this build reads (",
              join(known), "); set model.type and its keys");
}

}  // namespace

const std::vector<std::string>& model_types() { return type_names(); }

void add_model_type(const std::string& type, ModelFamily family) {
  ZT_CHECK(family.parse, "[config] model family '", type, "' registered without a parse");
  for (Family& f : families())
    if (f.type == type) {
      f.family = std::move(family);
      return;
    }
  families().push_back({type, std::move(family)});
  type_names().push_back(type);
}

void ModelConfig::wrong_family(const std::string& type) {
  ZT_THROW_AS(ErrorKind::config, "[config] the model keys asked for are not those of model.type '", type,
              "' (Note [model registry])");
}

ImageShape dataset_image_shape(const std::string& dataset) {
  return dataset == "cifar10" ? ImageShape{3, 32} : ImageShape{1, 28};
}

Config parse(const nlohmann::json& j, const std::string& source, const std::string& weights) {
  // Before anything copies or prints j (Note [hostile JSON]).
  const std::string deep = detail::deep_key(j, kMaxJsonDepth);
  ZT_CHECK_AS(ErrorKind::config, deep.empty(), "[config] ", source, ": '", deep, "' nests deeper than ", kMaxJsonDepth,
              " levels of lists and objects (the limit)");
  Config c;
  nlohmann::json resolved = j;  // "auto" values resolved (Note [auto values]); raw keeps them
  nlohmann::json raw = j;
  if (j.is_object())
    if (std::string note = resolve_hf_model(resolved, raw, weights, source); !note.empty()) c.notes.push_back(note);
  std::vector<std::string> sized;
  detail::resolve_autos(resolved, c.notes, c.auto_batch_keys, sized);
  Section top(resolved, "", source);
  top.allow({"train_batch_size",
             "train_micro_batch_size_per_gpu",
             "gradient_accumulation_steps",
             "gradient_clipping",
             "steps_per_print",
             "seed",
             "wall_clock_breakdown",
             "bf16",
             "fp16",
             "optimizer",
             "scheduler",
             "zero_optimization",
             "aio",
             "zero_allow_untested_optimizer",
             "sparse_gradients",
             "activation_checkpointing",
             "prescale_gradients",
             "communication_data_type",
             "data_types",
             "checkpoint",
             "model",
             "data",
             "run",
             "tensorboard",
             "csv_monitor",
             "wandb",
             "comms_logger",
             "flops_profiler"});
  // Batch keys: absent or null means "derive from the others" (resolve_batch).
  for (auto [key, dst] : {std::pair{"train_batch_size", &c.train_batch_size},
                          std::pair{"train_micro_batch_size_per_gpu", &c.train_micro_batch_size_per_gpu},
                          std::pair{"gradient_accumulation_steps", &c.gradient_accumulation_steps}})
    if (top.has(key) && !resolved.at(key).is_null()) top.read_int(key, *dst, 1);
  top.read_number("gradient_clipping", c.gradient_clipping, 0, false);
  top.read_int("steps_per_print", c.steps_per_print, 1);
  top.read_u64("seed", c.seed);
  top.read_bool("wall_clock_breakdown", c.wall_clock_breakdown);
  top.read_section("bf16", [&](const Section& s) {
    s.allow({"enabled"});
    s.read_bool("enabled", c.bf16);
  });
  top.read_section("fp16", [&](const Section& s) { parse_fp16(s, c.fp16); });
  ZT_CHECK_AS(ErrorKind::config, !(c.bf16 && c.fp16.enabled), "[config] ", source,
              ": 'bf16.enabled' and 'fp16.enabled' are both true; choose one");
  top.read_choice("communication_data_type", c.communication_data_type, {"fp32", "fp16", "bf16"});
  top.read_section("data_types", [&](const Section& s) {
    s.allow({"grad_accum_dtype"});
    s.read_choice("grad_accum_dtype", c.grad_accum_dtype, {"fp32", "fp16", "bf16"});
  });
  top.read_section("optimizer", [&](const Section& s) { parse_optimizer(s, c.optimizer); });
  top.read_section("scheduler", [&](const Section& s) { parse_scheduler(s, c.scheduler); });
  // The optimizer's "auto"s say the defaults they became (Note [auto values]).
  for (std::string& line : c.notes) {
    const auto fill = [&](const std::string& key, const std::string& value) {
      const std::string mark = "{optimizer." + key + "}";
      if (const size_t at = line.find(mark); at != std::string::npos)
        line.replace(at, mark.size(), value + " (zerotrain's " + c.optimizer.type + " default)");
    };
    const auto num = [](double v) {
      char s[32];
      std::snprintf(s, sizeof s, "%g", v);
      return std::string(s);
    };
    fill("lr", num(c.optimizer.lr));
    fill("betas", "[" + num(c.optimizer.beta1) + ", " + num(c.optimizer.beta2) + "]");
    fill("eps", num(c.optimizer.eps));
    fill("weight_decay", num(c.optimizer.weight_decay));
  }
  top.read_section("zero_optimization", [&](const Section& s) { parse_zero(s, c.zero); });
  top.read_section("aio", [&](const Section& s) { parse_aio(s, c.aio); });
  bool untested = false;  // accepted: every optimizer we have is native to the engine
  top.read_bool("zero_allow_untested_optimizer", untested);
  top.read_bool("sparse_gradients", c.sparse_gradients);
  bool prescale = false;
  top.read_bool("prescale_gradients", prescale);
  ZT_CHECK_AS(ErrorKind::config, !prescale, "[config] ", source,
              ": 'prescale_gradients' = true is not supported yet (allowed: false)");
  top.read_section("activation_checkpointing", [&](const Section& s) {
    auto& a = c.activation_checkpointing;
    a.enabled = true;
    s.allow({"partition_activations", "cpu_checkpointing", "contiguous_memory_optimization", "number_checkpoints",
             "synchronize_checkpoint_boundary", "profile"});
    for (const char* key : {"partition_activations", "cpu_checkpointing"}) {
      bool on = false;
      s.read_bool(key, on);
      ZT_CHECK_AS(ErrorKind::config, !on, "[config] ", source, ": 'activation_checkpointing.", key,
                  "' = true is not supported (allowed: false)");
    }
    bool ignored = false;  // layout hints with no effect on CPU
    s.read_bool("contiguous_memory_optimization", ignored);
    s.read_bool("synchronize_checkpoint_boundary", ignored);
    if (s.has("number_checkpoints") && !s.value("number_checkpoints").is_null())
      s.read_int("number_checkpoints", a.number_checkpoints, 1);
    s.read_bool("profile", a.profile);
  });
  top.read_section("model", [&](const Section& s) { parse_model(s, c.model); });
  top.read_section("data", [&](const Section& s) { parse_data(s, c.data); });
  top.read_section("run", [&](const Section& s) { parse_run(s, c.run); });
  top.read_section("checkpoint", [&](const Section& s) { parse_checkpoint(s, c.checkpoint); });
  if (c.checkpoint.dir.empty()) c.checkpoint.dir = c.run.dir + "/checkpoints";
  if (!top.has("model")) parse_model(Section(nlohmann::json::object(), "model", source), c.model);  // defaults
  top.read_section("tensorboard", [&](const Section& s) { parse_monitor(s, c.monitor.tensorboard); });
  top.read_section("csv_monitor", [&](const Section& s) { parse_monitor(s, c.monitor.csv_monitor); });
  for (const auto& section : {std::pair{"wandb", &c.monitor.wandb}, std::pair{"comms_logger", &c.monitor.comms_logger},
                               std::pair{"flops_profiler", &c.monitor.flops_profiler}}) {
    const std::string k = section.first;  // not a structured binding: clang 14's lambdas cannot capture those
    bool* on = section.second;
    top.read_section(k, [&](const Section& s) {  // their other keys (wandb's project, ...) change nothing here
      s.allow(k == "wandb"          ? std::vector<std::string>{"enabled", "group", "team", "project"}
              : k == "comms_logger" ? std::vector<std::string>{"enabled", "verbose", "prof_all", "debug", "prof_ops"}
                                    : std::vector<std::string>{"enabled", "recompute_fwd_factor", "profile_step",
                                                               "module_depth", "top_modules", "detailed", "output_file"});
      s.read_bool("enabled", *on);
      if (k == "flops_profiler") s.read_int("profile_step", c.monitor.flops_profile_step, 1);
    });
  }
  if (c.monitor.wandb)
    c.notes.push_back("wandb is not available here: the same scalars go to " + c.run.dir +
                      "/metrics.jsonl, and to TensorBoard or CSV files with 'tensorboard' or 'csv_monitor' enabled");
  detail::finish_autos(c, sized, resolved, source);  // Note [auto values]
  if (const Family* f = family_of(c.model.type); f && f->family.check) f->family.check(c, source);
  check_strategy(c, source);
  c.raw = raw;
  return c;
}

}  // namespace zt::config
