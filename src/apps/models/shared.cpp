#include "shared.h"

#include <algorithm>

#include "../tasks.h"

namespace zt::apps {

int64_t image_eval_batch(const config::Config& c, int64_t) {
  return std::min<int64_t>(1000, c.data.test_limit > 0 ? c.data.test_limit : 1000);  // ImageTask::eval_batch
}

ModelKind image_model(const char* type, decltype(ModelKind::build) build, decltype(ModelKind::input_features) features,
                      const char* input_keys) {
  return {.type = type,
          .build = build,
          .task = make_image_task,
          .example = image_example,
          .rows_per_sample = [](const config::Config&) { return int64_t(1); },
          .eval_batch = image_eval_batch,
          .input_features = features,
          .input_keys = input_keys};
}

MicroBatch image_example(const config::Config& c, int64_t n) {
  return {{Tensor::zeros({n, model_kind(c).input_features(c)})}, Tensor::zeros({n}, DType::i32), n};
}

MicroBatch lm_example(const config::Config& c, int64_t n) {
  const int64_t T = sequence_length(c);
  return {{Tensor::zeros({n, T}, DType::i32)}, Tensor::zeros({n * T}, DType::i32), n};
}

MicroBatch masked_example(const config::Config& c, int64_t n, bool per_token) {
  const int64_t T = sequence_length(c);
  return {{Tensor::zeros({n, T}, DType::i32), Tensor::zeros({n, T}, DType::i32)},
          Tensor::zeros({per_token ? n * T : n}, DType::i32), n};
}

int64_t sequence_length(const config::Config& c) {
  return c.data.seq_len > 0 ? std::min(c.data.seq_len, c.model.block_size) : c.model.block_size;
}

}  // namespace zt::apps
