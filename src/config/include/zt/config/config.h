#pragma once
// The run configuration: DeepSpeed's top-level keys (same names and meanings) plus our own
// `model`, `data` and `run` sections. Parsed from one JSON file, then `key=value` overrides
// (dotted paths, e.g. optimizer.params.lr=3e-4). Every key is validated: an unknown key names
// the nearest known one; a bad value names the key and what is allowed.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zt/config/section.h"
#include "zt/config/sections.h"

namespace zt::config {

struct SchedulerConfig {
  std::string type;  // "" = constant lr; WarmupLR | WarmupDecayLR | WarmupCosineLR | OneCycle | LRRangeTest
  nlohmann::json params = nlohmann::json::object();  // validated per type by optim::make_schedule
};

// Note [model registry]: `model.type` and `model.init_from` are config's; every other key of the
// model section belongs to the type's family, which lists, reads and checks them (apps' model
// entries register theirs before a config is parsed), so adding a family changes nothing here.
struct ModelKeys {
  virtual ~ModelKeys() = default;
  // The width DeepSpeed's "auto" bucket sizes scale with (Note [auto values]); 0: none.
  virtual int64_t hidden_size() const { return 0; }
};

struct ModelConfig {
  std::string type = "mlp";  // one of model_types()
  std::string init_from;     // safetensors, or a Hugging Face folder, that initialises the model (fine-tuning)
  // Every tensor of the weights loaded is used and every parameter found, else one error naming
  // all; false loads what matches and names the rest (model.init_from, import, eval, generate).
  bool init_strict = true;
  // The family's keys as its parse read them; null where the type's family is not registered.
  std::shared_ptr<const ModelKeys> keys;
  // The keys as family type T; a config error naming model.type when they are another family's.
  template <class T>
  const T& as() const {
    if (const T* k = dynamic_cast<const T*>(keys.get())) return *k;
    wrong_family(type);
  }
  [[noreturn]] static void wrong_family(const std::string& type);
};

// DeepSpeed's activation_checkpointing section: present = transformer blocks checkpoint their
// activations (recomputed in backward). number_checkpoints: how many blocks, from the first.
struct ActivationCheckpointingConfig {
  bool enabled = false;
  int64_t number_checkpoints = 0;  // 0 = every block
  bool profile = false;            // accepted: the activation peak is always reported (memory_peak)
};

struct DataConfig {
  // mnist | fashion-mnist | cifar10: images; tokens: token shards (zerotrain prepare) for gpt
  // (next token) or bert (masked LM); classify: labelled sequences (prepare --task sotu-party).
  std::string dataset = "mnist";
  std::string dir = "data/mnist";  // IDX files, CIFAR-10's binary batches, or the prepared shards
  // tokens: glob(3) patterns of llm.c shards (e.g. "data/fineweb10B/fineweb_train_*.bin"), used
  // instead of dir/train_*.bin and dir/val_*.bin when set; the matches go in name order.
  std::string train_files, val_files;
  bool shuffle = true;
  int64_t train_limit = 0;  // 0 = all training samples; else the first N
  int64_t test_limit = 0;
  int64_t pad_to = 0;         // images: 0 = as stored; else padded (centred) to pad_to x pad_to
  int64_t seq_len = 0;        // tokens per sample (0 = model.block_size)
  int64_t eval_every = 0;     // validation loss every this many steps (0 = at the end only)
  int64_t eval_batches = 20;  // validation batches (of the micro-batch size) for token data
  double mask_prob = 0.15;    // bert masked LM: share of tokens masked (80% [MASK], 10% random, 10% kept)
};

struct RunConfig {
  std::string dir = "runs/latest";  // metrics.jsonl, final weights, summary.json
  double epochs = 1.0;              // used when max_steps == 0
  int64_t max_steps = 0;
  int threads = 0;                    // 0 = OpenMP default
  bool pin_threads = true;            // bind each thread to one core of this rank's share (hwloc)
  std::string comm_backend = "auto";  // comm::backend_choices() (zt/comm/backends.h), Note [backend choice]
  double comm_timeout_s = 300.0;
  std::string device = "cpu";     // cpu | sim | cuda | cuda:K (Policy::device, Note [sim device])
  int64_t device_memory_mb = 0;   // caps run.device's allocator (0 = its whole memory)
  bool check_collectives = true;  // compare every collective's signature across ranks (Note [collective signatures])
  int64_t memory_budget_mb = 0;   // 0 = unlimited
  bool eval_at_end = true;
  std::string resume;  // "" (start fresh), "latest", a tag in checkpoint.dir, or a folder
  // fp16: this many optimizer steps skipped in a row (overflow at every step, e.g. a static
  // loss_scale too high) stop the run instead of "training" nothing; 0: never.
  int64_t max_consecutive_skipped_steps = 50;
  // false: no model.safetensors at the end (checkpoints only), for models whose consolidated
  // fp32 weights would not fit beside their swap files; an earlier run's weights are removed.
  bool save_weights = true;
  std::string bf16_products = "auto";  // auto | native | f32: 16-bit products' path (Note [16-bit products])
  // zero | parameter_server: ranks 0..parameter_servers-1 hold the parameters and optimizer
  // states in partitions, the others compute (Note [parameter server] in zero/param_server.h);
  // zero_optimization.stage is then not used.
  std::string strategy = "zero";
  int parameter_servers = 1;  // parameter_server: server ranks, 1 <= S < world size
  // The micro-batch where train_micro_batch_size_per_gpu is "auto" and train_batch_size gives
  // none (Note [auto values]): the Hugging Face Trainer's per_device_train_batch_size.
  int64_t per_device_train_batch_size = 8;
};

// DeepSpeed's monitor sections: where rank 0 also writes the scalars of metrics.jsonl.
struct MonitorConfig {
  struct Writer {
    bool enabled = false;
    std::string output_path, job_name = "DeepSpeedJobName";  // DeepSpeed's defaults
  };
  Writer tensorboard, csv_monitor;
  // comms_logger: per-collective calls and bytes in each metrics record and a summary at the end;
  // flops_profiler: the FLOPs and MFU of step profile_step in one line.
  bool wandb = false, comms_logger = false, flops_profiler = false;
  int64_t flops_profile_step = 1;
};

// Sharded checkpoints of a run (zt/ckpt/checkpoint.h).
struct CheckpointConfig {
  std::string dir;          // default <run.dir>/checkpoints
  int64_t every_steps = 0;  // save every this many steps and at the end; 0: no checkpoints
  int keep_last = 0;        // 0: keep all
  // Note [background save] in ckpt: "true", "false" or "auto" (JSON true/false too); auto saves in
  // the background where the states are in memory and the snapshot fits run.memory_budget_mb.
  std::string async = "auto";
};

struct Config {
  AioConfig aio;
  // DeepSpeed keys. Batch keys: 0 means "derive from the others" (DeepSpeed's rules).
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
  double gradient_clipping = 0.0;  // 0 = off
  int64_t steps_per_print = 10;
  uint64_t seed = 42;
  bool wall_clock_breakdown = false;
  bool bf16 = false;  // bf16.enabled
  Fp16Config fp16;
  std::string communication_data_type;  // "" (the working dtype), fp32, fp16, bf16
  std::string grad_accum_dtype;         // data_types.grad_accum_dtype: "" (the working dtype), fp32, fp16, bf16
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  ZeroConfig zero;
  bool sparse_gradients = false;  // embeddings exchange only the rows they touched
  ActivationCheckpointingConfig activation_checkpointing;
  // Ours.
  ModelConfig model;
  DataConfig data;
  RunConfig run;
  CheckpointConfig checkpoint;
  MonitorConfig monitor;

  // Lines the commands print before they start: each "auto" resolved, the keys accepted with no
  // effect here (Note [auto values]); the batch keys given as "auto", which resolve_batch fills.
  std::vector<std::string> notes;
  std::vector<std::string> auto_batch_keys;

  nlohmann::json raw;  // the validated JSON after overrides (written into the run directory)
};

// Deepest nesting of objects and lists accepted in a config file, an override's value, or the
// json given to parse() (Note [hostile JSON] in json_check.h); real configs need 4.
inline constexpr int kMaxJsonDepth = 64;
// Largest model.vocab_size: token ids are i32 and shards store up to uint32 (llm.c's version 2).
inline constexpr int64_t kMaxVocabSize = int64_t(1) << 24;
// Largest run.threads (OpenMP fails at tens of thousands of threads).
inline constexpr int kMaxThreads = 1024;
// Largest run.memory_budget_mb: its bytes must fit in int64.
inline constexpr int64_t kMaxMemoryBudgetMb = INT64_MAX >> 20;

// Parse and validate. `source` names the file in error messages. `weights`: what the command
// loads (eval's and generate's --weights); a Hugging Face folder there, or in model.init_from,
// gives model.type and its keys when the model section names no type (Note [HF config]).
Config parse(const nlohmann::json& j, const std::string& source = "<config>", const std::string& weights = "");
Config load(const std::string& path, const std::vector<std::string>& overrides = {}, const std::string& weights = "");
// load() of text already read; `path` names it in messages.
Config load_text(const std::string& text, const std::string& path, const std::vector<std::string>& overrides = {},
                 const std::string& weights = "");
// Apply "a.b.c=value" overrides to raw JSON (value parsed as JSON, else taken as a string).
void apply_overrides(nlohmann::json& j, const std::vector<std::string>& overrides);

// DeepSpeed's batch rule: train_batch_size = micro * accumulation * world. Fills in the
// missing one(s) and throws, naming all three values, when they cannot agree.
struct BatchSizes {
  int64_t train_batch_size, micro, accumulation;
};
BatchSizes resolve_batch(const Config& c, int world_size);
// One line per batch key given as "auto", with the value `b` gives it (Note [auto values]).
std::vector<std::string> batch_notes(const Config& c, const BatchSizes& b, int world_size);
// Ranks that run forward and backward on a share of the global batch: the world size, or under
// run.strategy parameter_server the workers (world size - run.parameter_servers); throws a
// config error naming run.parameter_servers and the largest value that leaves a worker.
int data_parallel_ranks(const Config& c, int world_size);

// model.type's allowed values: the families registered (Note [model registry]). A family lists
// its keys of the model section (beside type and init_from), reads them with the section's readers
// (absent keys keep its defaults; parse gives it an empty section when the config has no model
// section) and checks them once parse has read every section (against each other and the data),
// throwing config errors naming `source`. Registering a type again replaces its family.
using ModelCheck = void (*)(const Config& c, const std::string& source);
struct ModelFamily {
  std::vector<std::string> keys;
  std::shared_ptr<const ModelKeys> (*parse)(const Section& s) = nullptr;
  ModelCheck check = nullptr;
  // Note [HF config]: the Hugging Face `architectures` it reads, and a config.json of one as its
  // keys of the model section (a config error naming `source` and the field it cannot take).
  std::vector<std::string> hf_architectures = {};
  nlohmann::json (*from_hf)(const nlohmann::json& hf, const std::string& source) = nullptr;
};
const std::vector<std::string>& model_types();
void add_model_type(const std::string& type, ModelFamily family);

// Channels and side of the images a dataset stores (before data.pad_to): mnist and
// fashion-mnist 1 x 28 x 28, cifar10 3 x 32 x 32.
struct ImageShape {
  int64_t channels, size;
};
ImageShape dataset_image_shape(const std::string& dataset);

// Closest of `candidates` to `key` by edit distance ("" if none is close).
std::string nearest(const std::string& key, const std::vector<std::string>& candidates);

}  // namespace zt::config
