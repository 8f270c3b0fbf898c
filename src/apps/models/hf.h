#pragma once
// Hugging Face folders for every model entry (Note [HF mapping] in zt/ckpt/hf_folder.h): the
// configured model's mapping (its entry's), the check of a folder against it (model.init_strict),
// weights loaded into a built model, and the config files of an export.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_kind.h"
#include "zt/ckpt/hf_folder.h"
#include "zt/config/config.h"
#include "zt/nn/module.h"

namespace zt::apps {

ParamShapes param_shapes(const nn::Module& model);

// The entry's mapping of `params`; `folder` the folder's tensor names when reading, empty when
// writing. A config error for a model.type that has none.
ckpt::HfMapping hf_mapping(const config::Config& c, const ParamShapes& params,
                           const std::vector<std::string>& folder = {});
// The folder against the mapping: strict (model.init_strict), every problem in one config error;
// else, when `say`, one line on stderr per left-out name.
ckpt::HfMatch check_hf_folder(const ckpt::HfFolder& f, const ckpt::HfMapping& m, bool strict, bool say);
// Loads the folder into `model` (built whole); returns what it did.
std::string load_hf_weights(const config::Config& c, nn::Module& model, const std::string& dir, bool say);

// config.json (architectures, model_type, torch_dtype and the family's fields) and
// generation_config.json of c's model into `dir`, then the tokenizer's files (write_hf_tokenizer).
void write_hf_config(const config::Config& c, const std::string& dir, DType dtype);
// Hook: the tokenizer files (tokenizer.json, tokenizer_config.json, special_tokens_map.json) of
// an exported folder; writes nothing yet (the tokenizer side of issue 55 fills it in).
void write_hf_tokenizer(const config::Config& c, const std::string& dir);

}  // namespace zt::apps
