// Note [auto values] in auto_values.h.
#include "auto_values.h"

#include "json_check.h"
#include "zt/config/config.h"
#include "zt/core/error.h"
#include "zt/core/strings.h"

namespace zt::config::detail {
namespace {

bool is_auto(const nlohmann::json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

// The object at `path` of `j` (a dotted path), or null where any part is absent or not an object.
nlohmann::json* object_at(nlohmann::json& j, const std::vector<std::string>& path) {
  nlohmann::json* o = &j;
  for (const std::string& p : path) {
    if (!o->is_object() || !o->contains(p)) return nullptr;
    o = &(*o)[p];
  }
  return o->is_object() ? o : nullptr;
}

std::string dotted(const std::vector<std::string>& path, const std::string& key) {
  std::string s;
  for (const std::string& p : path) s += p + ".";
  return s + key;
}

}  // namespace

void resolve_autos(nlohmann::json& j, std::vector<std::string>& notes, std::vector<std::string>& batch,
                   std::vector<std::string>& sized) {
  if (!j.is_object()) return;
  // `value` replaces the "auto"; a null value removes the key, so its default applies.
  auto resolve = [&](const std::vector<std::string>& path, const std::string& key, const nlohmann::json& value,
                     const std::string& why) {
    nlohmann::json* o = object_at(j, path);
    if (!o || !o->contains(key) || !is_auto((*o)[key])) return;
    if (value.is_null())
      o->erase(key);
    else
      (*o)[key] = value;
    notes.push_back(dotted(path, key) + ": \"auto\" -> " + why);
  };
  for (const char* key : {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"})
    if (j.contains(key) && is_auto(j[key])) {
      j.erase(key);
      batch.push_back(key);
    }
  resolve({}, "gradient_clipping", 1.0, "1.0 (the Hugging Face Trainer's max_grad_norm)");
  for (const char* dtype : {"fp16", "bf16"})
    resolve({dtype}, "enabled", false, "false (the run trains in fp32 unless the config enables a 16-bit type)");
  for (const char* key : {"lr", "betas", "eps", "weight_decay"})  // the values: parse's, once it has them
    resolve({"optimizer", "params"}, key, nullptr, "{optimizer." + std::string(key) + "}");
  resolve({"scheduler", "params"}, "warmup_min_lr", nullptr, "0 (the schedule's default)");
  resolve({"scheduler", "params"}, "warmup_max_lr", nullptr, "the optimizer's lr");
  resolve({"scheduler", "params"}, "warmup_num_steps", nullptr, "the schedule's default (DeepSpeed's 1000)");
  resolve({"scheduler", "params"}, "total_num_steps", nullptr, "the run's length in optimizer steps");
  resolve({"zero_optimization"}, "stage3_gather_16bit_weights_on_model_save", true, "true (no effect here)");
  if (nlohmann::json* z = object_at(j, {"zero_optimization"}))
    for (const char* key : {"reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"})
      if (z->contains(key) && is_auto((*z)[key])) {
        z->erase(key);
        sized.push_back(key);
      }
}

void finish_autos(Config& c, const std::vector<std::string>& sized, const nlohmann::json& resolved,
                  const std::string& source) {
  // The bucket sizes DeepSpeed's "auto" scales with the model's width (Note [auto values]).
  const int64_t hidden = c.model.keys ? c.model.keys->hidden_size() : 0;
  for (const std::string& key : sized) {
    ZT_CHECK_AS(ErrorKind::config, hidden > 0, "[config] ", source, ": 'zero_optimization.", key,
                "' = \"auto\" scales with the model's hidden size, which model.type ", c.model.type,
                " does not have; give a number");
    // hidden^2 must fit int64 (a hostile mlp's hidden can be any positive integer).
    ZT_CHECK_AS(ErrorKind::config, hidden <= 3'037'000'499, "[config] ", source, ": 'zero_optimization.", key,
                "' = \"auto\" scales with the model's hidden size ", hidden, ", past what 64-bit sizes hold; give a number");
    int64_t& v = key == "reduce_bucket_size"            ? c.zero.reduce_bucket_size
                 : key == "stage3_prefetch_bucket_size" ? c.zero.stage3_prefetch_bucket_size
                                                        : c.zero.stage3_param_persistence_threshold;
    v = key == "reduce_bucket_size"            ? hidden * hidden
        : key == "stage3_prefetch_bucket_size" ? int64_t(0.9 * double(hidden * hidden))
                                               : 10 * hidden;
    c.notes.push_back("zero_optimization." + key + ": \"auto\" -> " + std::to_string(v) + " (hidden size " +
                      std::to_string(hidden) + ")");
  }
  // DeepSpeed keys whose only effect DeepSpeed's own engine has, named once.
  std::vector<std::string> inert;
  if (resolved.contains("zero_allow_untested_optimizer")) inert.push_back("zero_allow_untested_optimizer");
  if (resolved.contains("zero_optimization") && resolved["zero_optimization"].is_object())
    for (const char* key : {"allgather_partitions", "reduce_scatter", "stage3_gather_16bit_weights_on_model_save",
                            "stage3_gather_fp16_weights_on_model_save"})
      if (resolved["zero_optimization"].contains(key)) inert.push_back(std::string("zero_optimization.") + key);
  if (!inert.empty()) c.notes.push_back("accepted, with no effect here: " + join(inert));
}

}  // namespace zt::config::detail
