#pragma once
// What a training job feeds the model and how it scores it: image classification (MNIST,
// Fashion-MNIST), next-token prediction on token shards (gpt), masked-LM pretraining (bert) and
// sequence classification (bert fine-tuning). The training loop is the same for all of them.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zt/comm/group.h"
#include "zt/config/config.h"
#include "zt/core/tensor.h"
#include "zt/train/batches.h"

namespace zt::apps {

using train::MicroBatch;  // Note [train layer]

// What a task reads of its model (the model's entry says, Note [model registry]): the vocabulary
// and positions of a token model, the classes of a classifier; 0 where the model has none.
struct ModelShape {
  int64_t vocab_size = 0, block_size = 0, num_classes = 0;
};

using Forward = std::function<Tensor(const std::vector<Tensor>&)>;

struct EvalResult {
  nlohmann::json metrics;  // {"val_loss": ...} or {"test_accuracy": ...}
  std::string line;        // printed by rank 0, e.g. "test accuracy: 0.9771 (9771/10000)"
};

class Task {
 public:
  virtual ~Task() = default;
  virtual int64_t train_size() const = 0;  // training samples in an epoch
  // Samples order[begin, end) of the training set (epoch `epoch`) as one micro-batch.
  virtual MicroBatch gather(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t epoch) const = 0;
  // What the micro-batch order[begin, end) of the global batch order[global_begin, global_end)
  // multiplies its mean loss by, so that the step's loss is the global batch's mean whatever
  // the split (1 when every sample scores the same number of targets).
  virtual double weight(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t global_begin,
                        int64_t global_end, int64_t epoch) const {
    (void)order, (void)begin, (void)end, (void)global_begin, (void)global_end, (void)epoch;
    return 1.0;
  }
  // Mean cross-entropy of the model's output over the scored targets.
  virtual Tensor loss(const Tensor& out, const MicroBatch& b) const { return cross_entropy(out, b.targets); }
  // The same of any output [..., classes] and its i32 targets (-100: not scored), on out's device.
  static Tensor cross_entropy(const Tensor& out, const Tensor& targets);
  // Runs on every rank (stage 3 gathers collectively): each rank scores a share, then all agree.
  // whole: all of the held-out split (the final evaluation); else data.eval_batches batches of it
  // for token data (the periodic estimate).
  virtual EvalResult evaluate(const Forward& forward, comm::Group& group, int64_t batch, bool whole) const = 0;
  // Sequences (or images) per evaluation forward, given the training micro-batch.
  virtual int64_t eval_batch(int64_t micro) const { return micro; }
  // Printed once before training (baselines of the held-out data); empty when none.
  virtual std::string describe() const { return {}; }
};

// The task that trains the config's model on its data.dataset (the model's entry, Note [model
// registry], chooses), its data loaded (and checked) now; without the training split when only
// evaluating.
std::unique_ptr<Task> make_task(const config::Config& cfg, bool with_train = true);

// The tasks the model entries choose from, each refusing data it cannot read with one line.
bool is_image_dataset(const std::string& dataset);  // mnist, fashion-mnist, cifar10
std::unique_ptr<Task> make_image_task(const config::Config& c, bool with_train);
// Token shards: masked-LM with bert's tokenizer, else next-token prediction; "" takes shards of
// any tokenizer (gpt2 and bert are checked against prepare's manifest).
std::unique_ptr<Task> make_token_task(const config::Config& c, const std::string& tokenizer, bool with_train);
std::unique_ptr<Task> make_classify_task(const config::Config& c, bool with_train);
// A config error: data.dataset is not one that model.type trains on (`takes` names those).
[[noreturn]] void refuse_dataset(const config::Config& c, const std::string& takes);

}  // namespace zt::apps
