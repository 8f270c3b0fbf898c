#include "hf.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "../session.h"
#include "model_kind.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::apps {

namespace fs = std::filesystem;

ParamShapes param_shapes(const nn::Module& model) {
  ParamShapes out;
  for (const auto& [name, p] : model.named_parameters()) out.emplace_back(name, p.shape());
  return out;
}

ckpt::HfMapping hf_mapping(const config::Config& c, const ParamShapes& params, const std::vector<std::string>& folder) {
  const ModelKind& k = model_kind(c);
  ZT_CHECK_AS(ErrorKind::config, k.hf_mapping, "[config] model.type ", c.model.type,
              " has no Hugging Face counterpart (folders are read and written for gpt, bert and llama)");
  return k.hf_mapping(c, params, folder);
}

ckpt::HfMatch check_hf_folder(const ckpt::HfFolder& f, const ckpt::HfMapping& m, bool strict, bool say) {
  ckpt::HfMatch r = f.match(m);
  if (r.complete()) return r;
  // The same on every rank (each reads the same folder): a config error, said once.
  ZT_CHECK_AS(ErrorKind::config, !strict, "[model] ", f.dir(), " does not fit the model: ", r.problems(),
              " (model.init_strict=false loads what fits and names the rest)");
  if (say) {
    for (const std::string& p : r.left_out)
      std::fprintf(stderr, "zerotrain: model.init_strict=false: parameter %s left as initialised (not in %s)\n",
                   p.c_str(), f.dir().c_str());
    for (const std::string& t : r.unused)
      std::fprintf(stderr, "zerotrain: model.init_strict=false: tensor %s of %s not used\n", t.c_str(),
                   f.dir().c_str());
    for (const std::string& t : r.misshapen)
      std::fprintf(stderr, "zerotrain: model.init_strict=false: tensor %s not used\n", t.c_str());
  }
  return r;
}

std::string load_hf_weights(const config::Config& c, nn::Module& model, const std::string& dir, bool say) {
  const ckpt::HfFolder f(dir);
  const ckpt::HfMapping m = hf_mapping(c, param_shapes(model), f.tensor_names());
  const ckpt::HfMatch r = check_hf_folder(f, m, c.model.init_strict, say);
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : model.named_parameters()) params[name] = p;
  int64_t loaded = 0;
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (!r.usable[i]) continue;
    Tensor dst = params.at(m.params[i].param);
    dst.copy_(f.read_param(m.params[i]));  // f32, widened exactly; into the parameter's dtype
    ++loaded;
  }
  ZT_CHECK_AS(ErrorKind::config, loaded > 0, "[model] ", dir, " holds none of the model's parameters");
  return std::to_string(loaded) + " parameters from the Hugging Face folder " + dir +
         (r.left_out.empty() ? "" : "; left as initialised: " + std::to_string(r.left_out.size()));
}

void write_hf_config(const config::Config& c, const std::string& dir, DType dtype) {
  const ModelKind& k = model_kind(c);
  ZT_CHECK_AS(ErrorKind::config, k.hf_config, "[config] model.type ", c.model.type,
              " has no Hugging Face counterpart (folders are read and written for gpt, bert and llama)");
  nlohmann::json j = k.hf_config(c);
  j["torch_dtype"] = dtype == DType::bf16 ? "bfloat16" : dtype == DType::f16 ? "float16" : "float32";
  j["transformers_version"] = "4.40.0";  // the config format written; any later transformers reads it
  write_file_atomic((fs::path(dir) / "config.json").string(), j.dump(2) + "\n", ErrorKind::checkpoint, "[export]");
  nlohmann::json g = {{"_from_model_config", true}, {"transformers_version", "4.40.0"}};
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (j.contains(key)) g[key] = j[key];
  write_file_atomic((fs::path(dir) / "generation_config.json").string(), g.dump(2) + "\n", ErrorKind::checkpoint,
                    "[export]");
  write_hf_tokenizer(c, dir);
}

void write_hf_tokenizer(const config::Config& c, const std::string& dir) {
  // Kept beside the run's weights, else named by the data's manifest; GPT-2's files under the
  // names transformers' GPT2Tokenizer reads (vocab.json, merges.txt: the same contents).
  std::vector<std::string> files;
  for (const char* name : {"tokenizer.json", "tokenizer.model", "encoder.json", "vocab.bpe"})
    if (fs::exists(fs::path(c.run.dir) / name)) files.push_back((fs::path(c.run.dir) / name).string());
  if (files.empty()) files = manifest_tokenizer_files(c);
  for (const std::string& path : files) {
    const std::string name = kept_tokenizer_name(path);
    if (name == "vocab.json") continue;  // BERT's npm vocabulary: not a form transformers reads
    std::ifstream src(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(src)), {});
    const std::string as = name == "encoder.json" ? "vocab.json" : name == "vocab.bpe" ? "merges.txt" : name;
    write_file_atomic((fs::path(dir) / as).string(), bytes, ErrorKind::checkpoint, "[export]");
  }
}

}  // namespace zt::apps
