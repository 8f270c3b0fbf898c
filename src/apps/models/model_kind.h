#pragma once
// Note [model registry]: everything the commands need to know about one model.type, in one
// entry: its keys of the model section (config holds none of them), how to build it, an example micro-batch for the dry run that measures its activations
// (Note [measured activations] in dry_run.h), which task trains it on which data, and whether
// `generate` can sample from it. train, eval, estimate and
// generate ask the entry; none of them compares model.type. Adding a model is one file (its
// entry, and its module if nn has none) plus one line in registry.cpp.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../tasks.h"
#include "zt/ckpt/hf_folder.h"
#include "zt/config/config.h"
#include "zt/nn/module.h"

namespace zt::apps {

using ParamShapes = std::vector<std::pair<std::string, Shape>>;  // a model's parameters, model order

// A model's attention heads, as ops::attention_path takes them (the start line names its kernels).
struct AttentionHeads {
  int64_t n_head, n_kv_head, head_size;
  bool key_mask;  // padding keys masked (BERT's attention_mask)
};

struct ModelKind {
  const char* type;  // the model.type that selects it
  // Its keys of the model section: their names, how they are read and checked (config::parse runs
  // them); its other functions read them back through c.model.as<its keys>().
  config::ModelFamily family;
  // What its task reads of it: vocabulary and positions of a token model, classes of a classifier.
  ModelShape (*shape)(const config::Config& c);
  // The module (deferred: parameters get shapes and initialisers only, Note [deferred init]).
  std::shared_ptr<nn::Module> (*build)(const config::Config& c, bool deferred);
  // The task that trains it on data.dataset, its data loaded and checked; a config error, naming
  // the datasets it takes, for any other.
  std::unique_ptr<Task> (*task)(const config::Config& c, bool with_train);
  // A micro-batch of `samples` as its task makes them (shapes and dtypes; values all zero), on the
  // host: what the dry run feeds the model (Note [measured activations] in dry_run.h).
  MicroBatch (*example)(const config::Config& c, int64_t samples);
  // Rows a sample feeds through each weight: tokens of a sequence, 1 for an image.
  int64_t (*rows_per_sample)(const config::Config& c);
  // FLOPs a row costs beyond 6 per parameter (Note [step cost]): a transformer token's attention, a
  // convolution's weights applied at every position of its image.
  int64_t (*extra_flops_per_row)(const config::Config& c) = nullptr;
  // Its attention's heads; null for a model without attention.
  AttentionHeads (*attention)(const config::Config& c) = nullptr;
  // Samples per evaluation forward, given the training micro-batch, before any data is read.
  int64_t (*eval_batch)(const config::Config& c, int64_t micro);
  // An image model: the features a sample has, and the keys that set them for the data's error
  // line (" (model.input_dim)"); null for a model of tokens.
  int64_t (*input_features)(const config::Config& c) = nullptr;
  const char* input_keys = "";
  // The tokenizer `generate` samples with; null for a model that is not a language model.
  const char* generates_with = nullptr;
  // Note [HF mapping] (zt/ckpt/hf_folder.h): the family's Hugging Face names and layouts of its
  // parameters (`params`, model order); `folder` holds the folder's tensor names when reading (an
  // optional prefix is decided from them), nothing when writing. Null: no Hugging Face counterpart.
  ckpt::HfMapping (*hf_mapping)(const config::Config& c, const ParamShapes& params,
                                const std::vector<std::string>& folder) = nullptr;
  // Its config.json (architectures, model_type and the fields transformers' config class reads;
  // torch_dtype is added by the caller), the inverse of its family's from_hf.
  nlohmann::json (*hf_config)(const config::Config& c) = nullptr;
};

// The entry of model.type, or a config error listing the registered types.
const ModelKind& model_kind(const std::string& type);
inline const ModelKind& model_kind(const config::Config& c) { return model_kind(c.model.type); }
std::vector<const ModelKind*> model_kinds();
// Tells config::parse the types of the entries (before any config is parsed).
void register_model_types();

}  // namespace zt::apps
