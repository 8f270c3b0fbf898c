#pragma once
// Note [auto values]: the Hugging Face Trainer and Accelerate write DeepSpeed configs with "auto"
// where their own arguments fill the value in. zerotrain resolves each such key as that
// integration does, from its own settings and defaults instead of the Trainer's arguments:
//   - train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps: derived
//     from the others and the world size (resolve_batch); where neither train_batch_size nor the
//     micro-batch is a number, the micro-batch is run.per_device_train_batch_size (8, the
//     Trainer's default) and the accumulation 1;
//   - optimizer.params.* and scheduler.params.*: zerotrain's defaults (the optimizer's lr, betas,
//     eps and weight decay; the schedule's warmup from 0 to the lr, the run's length);
//   - gradient_clipping: 1.0 (the Trainer's max_grad_norm); fp16/bf16.enabled: false (fp32);
//   - reduce_bucket_size: hidden^2, stage3_prefetch_bucket_size: 0.9 hidden^2,
//     stage3_param_persistence_threshold: 10 hidden, with the model family's hidden size;
//   - stage3_gather_16bit_weights_on_model_save: true (it changes nothing here).
// Each resolution is one line the commands print before they start (Config::notes).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zt::config {
struct Config;
}

namespace zt::config::detail {

// The "auto"s of `j` (the whole config) whose value needs no model: replaced in `j` by their value
// or removed (a default applies), each with a line in `notes`; the batch keys' names go to
// `batch`, the model-sized bucket keys' to `sized`, both removed from `j`.
void resolve_autos(nlohmann::json& j, std::vector<std::string>& notes, std::vector<std::string>& batch,
                   std::vector<std::string>& sized);

// Once the model's keys are read: the bucket sizes from its hidden size, each said in a line of
// c.notes, and one line naming the DeepSpeed keys `resolved` has that change nothing here.
void finish_autos(Config& c, const std::vector<std::string>& sized, const nlohmann::json& resolved,
                  const std::string& source);

}  // namespace zt::config::detail
