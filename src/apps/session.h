#pragma once
// What the commands share: building the model, loading weights and image data, and the engine
// options from a validated Config.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zt/config/config.h"
#include "zt/data/mnist.h"
#include "zt/nn/module.h"
#include "zt/zero/engine.h"

namespace zt::apps {

// deferred: parameters get shapes only; the engine materialises them into its flat layout
// (stage 3: one unit at a time), and `estimate` needs no memory for them at all.
std::shared_ptr<nn::Module> build_model(const config::Config& c, bool deferred = false);
// `make` run as a model entry builds a model of `params` parameters that lives in this process's
// memory whole (mlp, cnn): one larger than the machine, or memory refused, is one out-of-memory
// line that says so.
std::shared_ptr<nn::Module> build_within_memory(int64_t params, bool deferred,
                                                const std::function<std::shared_ptr<nn::Module>()>& make);
// The train or test split of data.dataset from data.dir (data.*_limit, padded to data.pad_to),
// normalised with the dataset's statistics; its features must be what the model takes.
data::Dataset load_image_split(const config::Config& c, const std::string& split);
// The engine takes the config's sections as they are; this adds what several keys decide.
// run.device as a Device (one line naming the problem for a build without CUDA or a missing GPU);
// "cuda" under mpirun takes GPU (local rank mod the GPUs seen).
Device run_device(const std::string& device);
// Note [device cap]: the bytes run.device_memory_mb allows on `d`, 0 meaning the device's whole
// memory (a GPU's, sim's address space); a cap past what the device holds is a config error
// naming it. 0 on the cpu. `capacity` stands in for the device's own where it is not here.
int64_t device_cap_bytes(const config::Config& c, Device d, std::optional<size_t> capacity = std::nullopt);
// run_device, with run.device_memory_mb applied to its allocator: what every command that takes
// run.device computes on (train's strategies, eval, generate).
Device open_run_device(const config::Config& c);
zero::EngineOptions engine_options(const config::Config& c, const config::BatchSizes& b);
// What a run needs of its settings at `world` ranks beyond config::parse, before any data is
// read: DeepSpeed's batch rule and the scheduler's params. `estimate` checks them as `train` does
// (the same functions, so the same lines), so it never plans settings that cannot train.
config::BatchSizes check_run_settings(const config::Config& c, int world);
// The tokenizer files prepare's manifest in data.dir names (token data), each still what prepare
// read (sha256); empty where there is no manifest, none is named, or one moved or changed since
// (`problem` then says which).
std::vector<std::string> manifest_tokenizer_files(const config::Config& c, std::string* problem = nullptr);
// The name such a file is kept under beside the weights: tokenizer.json, tokenizer.model, or
// GPT-2's and BERT's own names (whatever it was called when prepare read it).
std::string kept_tokenizer_name(const std::string& path);
// Rank 0's lines before a run starts: each "auto" of the config resolved, the keys with no effect
// (Note [auto values] in config).
void print_config_notes(const config::Config& cfg, const config::BatchSizes& bs, int world);
// Copies parameters' values from a safetensors file by name (each of that shape, floating), or
// from a Hugging Face folder through the model entry's mapping (models/hf.h). Every parameter
// is found and every tensor used, else one error naming all that is missing, unused or
// misshapen, unless model.init_strict is false: then what matches is loaded, the rest named on
// stderr when `say`. Returns what it did ("12 tensors from F").
std::string load_weights(const config::Config& c, nn::Module& model, const std::string& path, bool say = true);

// "param=1.0MiB grad=... peak=..." of the device's allocator ("sim:0: param=..." off the cpu).
std::string mem_summary(Device device = Device::cpu());

}  // namespace zt::apps
