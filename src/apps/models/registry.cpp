// Note [model registry]: the models this build trains; a new one adds its entry here.
#include <algorithm>

#include "model_kind.h"

namespace zt::apps {

extern const ModelKind kMlp, kCnn, kGpt, kBert, kResMlp, kLlama;

std::vector<const ModelKind*> model_kinds() { return {&kMlp, &kCnn, &kGpt, &kBert, &kResMlp, &kLlama}; }

void register_model_types() {
  for (const ModelKind* k : model_kinds()) config::add_model_type(k->type, k->family);
}

const ModelKind& model_kind(const std::string& type) {
  std::string names;
  for (const ModelKind* k : model_kinds()) {
    if (type == k->type) return *k;
    names += (names.empty() ? "" : ", ") + std::string(k->type);
  }
  ZT_THROW_AS(ErrorKind::config, "[config] model.type '", type, "' is not a model of this build (allowed: ", names,
              ")");
}

}  // namespace zt::apps
