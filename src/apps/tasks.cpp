#include "tasks.h"

#include "session.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/core/random.h"
#include "zt/data/mnist.h"
#include "zt/data/ngram.h"
#include "zt/data/seq_cls.h"
#include "zt/data/token_shard.h"
#include "zt/ops/ops.h"

namespace zt::apps {

Tensor Task::loss(const Tensor& out, const MicroBatch& b) const {
  const int64_t classes = out.size(out.dim() - 1);
  const Tensor logits = out.dim() == 2 ? out : ag::reshape(out, {out.numel() / classes, classes});
  return ag::cross_entropy(logits, b.targets);
}

namespace {

// Rows whose target is scored (>= 0) and whose argmax equals it.
int64_t count_correct_scored(const Tensor& logits, const Tensor& targets) {
  const std::vector<float> pred = ops::argmax(logits).to_vector(), want = targets.to_vector();
  int64_t n = 0;
  for (size_t i = 0; i < want.size(); ++i) n += want[i] >= 0 && pred[i] == want[i];
  return n;
}

// Batches 0..n-1 shared over the ranks; every rank runs the same number of forwards (a stage-3
// model gathers collectively), the ones past n scored with weight 0. Returns the summed
// (value, count) over all batches.
std::pair<double, double> score_shared(comm::Group& g, int64_t n,
                                       const std::function<std::pair<double, double>(int64_t)>& score) {
  const int64_t world = g.size(), rounds = (n + world - 1) / world;
  double sum = 0, count = 0;
  for (int64_t r = 0; r < rounds; ++r) {
    const int64_t k = r * world + g.rank();
    auto [s, c] = score(std::min(k, n - 1));
    if (k < n) sum += s, count += c;
  }
  return {g.all_reduce_scalar(sum, "evaluation, sum"), g.all_reduce_scalar(count, "evaluation, count")};
}

// ---- image classification -------------------------------------------------------------------

class ImageTask : public Task {
 public:
  ImageTask(const config::Config& c, bool with_train) {
    if (with_train) train_ = data::load_mnist(c.data.dir, "train", 0.1307f, 0.3081f, c.data.train_limit);
    if (c.run.eval_at_end || !with_train)
      test_ = data::load_mnist(c.data.dir, "test", 0.1307f, 0.3081f, c.data.test_limit);
  }
  int64_t train_size() const override { return train_.size(); }
  int64_t eval_batch(int64_t) const override { return 1000; }
  MicroBatch gather(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t) const override {
    data::Batch b = data::gather_batch(train_, order, begin, end);
    return {{b.x}, b.y, end - begin};
  }
  EvalResult evaluate(const Forward& forward, comm::Group& g, int64_t batch) const override {
    const int64_t n = test_.size(), nb = (n + batch - 1) / batch;
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
    auto [correct, count] = score_shared(g, nb, [&](int64_t k) {
      data::Batch b = data::gather_batch(test_, order, k * batch, std::min(n, (k + 1) * batch));
      return std::pair<double, double>(double(ops::count_correct(forward({b.x}), b.y)), double(b.y.numel()));
    });
    const double acc = count > 0 ? correct / count : 0;
    char line[96];
    std::snprintf(line, sizeof line, "test accuracy: %.4f (%lld/%lld)", acc, (long long)std::llround(correct),
                  (long long)std::llround(count));
    return {{{"test_accuracy", acc}}, line};
  }

 private:
  data::Dataset train_, test_;
};

// ---- token shards ---------------------------------------------------------------------------

// Every file dir/prefix_*.bin in name order, concatenated.
std::vector<uint16_t> read_split(const std::string& dir, const std::string& prefix) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix + "_", 0) == 0 && e.path().extension() == ".bin") files.push_back(e.path().string());
  }
  ZT_CHECK_AS(ErrorKind::data, !ec, "[data] cannot list ", dir, ": ", ec.message(),
              " (make it with: zerotrain prepare --out ", dir, ")");
  ZT_CHECK_AS(ErrorKind::data, !files.empty(), "[data] ", dir, " has no ", prefix,
              "_*.bin token shards (make them with: zerotrain prepare --out ", dir, ")");
  std::sort(files.begin(), files.end());
  std::vector<uint16_t> all;
  for (const auto& f : files) {
    std::vector<uint16_t> t = data::read_token_shard(f);
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

void check_vocab(const std::vector<uint16_t>& tokens, int64_t vocab, const std::string& what) {
  const auto it = std::max_element(tokens.begin(), tokens.end());
  ZT_CHECK_AS(ErrorKind::config, it == tokens.end() || int64_t(*it) < vocab, "[data] ", what, " holds token id ",
              int64_t(*it), " at position ", it - tokens.begin(), " but model.vocab_size is ", vocab);
}

// Windows of `span` tokens at stride `span` (sample i starts at i * span).
class TokenTask : public Task {
 public:
  TokenTask(const config::Config& c, int64_t span, bool with_train) : c_(c), span_(span) {
    if (with_train) {
      train_ = read_split(c.data.dir, "train");
      check_vocab(train_, c.model.vocab_size, c.data.dir + "/train_*.bin");
    }
    val_ = read_split(c.data.dir, "val");
    check_vocab(val_, c.model.vocab_size, c.data.dir + "/val_*.bin");
    n_train_ = windows(train_);
    if (c.data.train_limit > 0) n_train_ = std::min(n_train_, c.data.train_limit);
    ZT_CHECK_AS(ErrorKind::data, (n_train_ > 0 || !with_train) && windows(val_) > 0, "[data] ", c.data.dir,
                " holds too few tokens for one sequence of ", span, " (train ", train_.size(), ", val ", val_.size(),
                ")");
  }
  int64_t train_size() const override { return n_train_; }

 protected:
  int64_t windows(const std::vector<uint16_t>& t) const {
    return std::max<int64_t>(0, (int64_t(t.size()) - 1) / span_);
  }
  int64_t seq() const { return c_.data.seq_len > 0 ? c_.data.seq_len : c_.model.block_size; }
  // Validation batches of `batch` windows (the first ones, never overlapping), at most eval_batches.
  int64_t val_batches(int64_t batch) const {
    return std::max<int64_t>(1, std::min(c_.data.eval_batches, windows(val_) / batch));
  }
  const config::Config& c_;
  int64_t span_, n_train_ = 0;
  std::vector<uint16_t> train_, val_;
};

// GPT: x = window[0, T), y = window[1, T], every position scored.
class LmTask : public TokenTask {
 public:
  LmTask(const config::Config& c, bool with_train)
      : TokenTask(c, c.data.seq_len > 0 ? c.data.seq_len : c.model.block_size, with_train) {}
  // The n-gram baselines the validation loss is compared with, computed on the same split.
  std::string describe() const override {
    if (train_.empty()) return {};
    const data::NgramBaseline b = data::ngram_baseline(train_, val_, c_.model.vocab_size);
    char line[200];
    std::snprintf(line, sizeof line,
                  "baselines on %s (validation, %lld tokens): unigram %.4f, interpolated bigram %.4f nats/token "
                  "(lambda %.2f)",
                  c_.data.dir.c_str(), (long long)b.val_tokens, b.unigram_loss, b.bigram_loss, b.lambda);
    return line;
  }
  MicroBatch gather(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t) const override {
    std::vector<int64_t> idx(order.begin() + begin, order.begin() + end);
    return make(train_, idx);
  }
  EvalResult evaluate(const Forward& forward, comm::Group& g, int64_t batch) const override {
    const int64_t b = std::min<int64_t>(batch, windows(val_));
    auto [sum, count] = score_shared(g, val_batches(b), [&](int64_t k) {
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < b; ++i) idx.push_back(k * b + i);
      MicroBatch mb = make(val_, idx);
      const double n = double(mb.targets.numel());
      return std::pair<double, double>(loss(forward(mb.inputs), mb).item() * n, n);
    });
    const double l = sum / count;
    char line[128];
    std::snprintf(line, sizeof line, "validation loss: %.4f nats/token (perplexity %.1f, %lld tokens)", l, std::exp(l),
                  (long long)count);
    return {{{"val_loss", l}, {"val_tokens", count}}, line};
  }

 private:
  MicroBatch make(const std::vector<uint16_t>& t, const std::vector<int64_t>& idx) const {
    const int64_t T = span_, b = int64_t(idx.size());
    std::vector<int32_t> x(static_cast<size_t>(b * T)), y(static_cast<size_t>(b * T));
    for (int64_t r = 0; r < b; ++r)
      for (int64_t j = 0; j < T; ++j) {
        x[size_t(r * T + j)] = t[size_t(idx[size_t(r)] * T + j)];
        y[size_t(r * T + j)] = t[size_t(idx[size_t(r)] * T + j + 1)];
      }
    return {{Tensor::from_ints(x, {b, T})}, Tensor::from_ints(y, {b * T}), b};
  }
};

// BERT masked LM: [CLS] + T-2 tokens + [SEP]; mask_prob of the text tokens are scored, of those
// 80% become [MASK], 10% a random token, 10% stay. Masks depend on (seed, epoch, sample) only,
// so every world size sees the same batch.
class MlmTask : public TokenTask {
 public:
  static constexpr int32_t kCls = 101, kSep = 102, kMask = 103;
  MlmTask(const config::Config& c, bool with_train)
      : TokenTask(c, (c.data.seq_len > 0 ? c.data.seq_len : c.model.block_size) - 2, with_train) {
    ZT_CHECK_AS(ErrorKind::config, span_ >= 1, "[data] masked LM needs data.seq_len >= 3");
  }
  MicroBatch gather(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t epoch) const override {
    std::vector<int64_t> idx(order.begin() + begin, order.begin() + end);
    return make(train_, idx, c_.seed + uint64_t(epoch) * 0x9E3779B97F4A7C15ull);
  }
  EvalResult evaluate(const Forward& forward, comm::Group& g, int64_t batch) const override {
    const int64_t b = std::min<int64_t>(batch, windows(val_));
    double correct_sum = 0;
    auto [sum, count] = score_shared(g, val_batches(b), [&](int64_t k) {
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < b; ++i) idx.push_back(k * b + i);
      MicroBatch mb = make(val_, idx, ~c_.seed);
      Tensor out = forward(mb.inputs);
      Tensor logits = out.reshape({out.numel() / out.size(2), out.size(2)});
      int64_t n = 0;
      for (float t : mb.targets.to_vector()) n += t >= 0 ? 1 : 0;
      correct_sum += double(count_correct_scored(logits, mb.targets));
      return std::pair<double, double>(loss(out, mb).item() * double(n), double(n));
    });
    const double correct = g.all_reduce_scalar(correct_sum, "evaluation, masked accuracy");
    const double l = sum / count;
    char line[160];
    std::snprintf(line, sizeof line,
                  "validation masked-LM loss: %.4f nats/token, masked-token accuracy %.4f (%lld tokens)", l,
                  correct / count, (long long)count);
    return {{{"val_loss", l}, {"val_masked_accuracy", correct / count}, {"val_tokens", count}}, line};
  }

 private:
  MicroBatch make(const std::vector<uint16_t>& t, const std::vector<int64_t>& idx, uint64_t seed) const {
    const int64_t T = span_ + 2, b = int64_t(idx.size()), V = c_.model.vocab_size;
    std::vector<int32_t> x(size_t(b * T)), y(size_t(b * T), -100), mask(size_t(b * T), 1);
    for (int64_t r = 0; r < b; ++r) {
      Generator gen(seed ^ (uint64_t(idx[size_t(r)]) * 0xD1B54A32D192ED03ull));
      int32_t* row = &x[size_t(r * T)];
      row[0] = kCls;
      row[T - 1] = kSep;
      for (int64_t j = 0; j < span_; ++j) {
        const int32_t tok = t[size_t(idx[size_t(r)] * span_ + j)];
        row[j + 1] = tok;
        if (gen.uniform01() >= c_.data.mask_prob) continue;
        y[size_t(r * T + j + 1)] = tok;
        const double u = gen.uniform01();
        if (u < 0.8)
          row[j + 1] = kMask;
        else if (u < 0.9)
          row[j + 1] = int32_t(gen.below(uint64_t(V)));
      }
    }
    return {{Tensor::from_ints(x, {b, T}), Tensor::from_ints(mask, {b, T})}, Tensor::from_ints(y, {b * T}), b};
  }
};

// ---- sequence classification (BERT fine-tuning) ----------------------------------------------

// dir/train.bin and dir/test.bin (zerotrain prepare --task sotu-party); inputs {ids, mask}.
class ClassifyTask : public Task {
 public:
  ClassifyTask(const config::Config& c, bool with_train) {
    if (with_train) train_ = data::read_seq_cls(c.data.dir + "/train.bin");
    test_ = data::read_seq_cls(c.data.dir + "/test.bin");
    for (const data::SeqClsSet* s : {&train_, &test_}) {
      if (s->size() == 0) continue;
      ZT_CHECK_AS(ErrorKind::config, s->num_classes == c.model.num_classes, "[data] ", c.data.dir, " has ",
                  s->num_classes, " classes but model.num_classes is ", c.model.num_classes);
      ZT_CHECK_AS(ErrorKind::config, s->max_len <= c.model.block_size, "[data] ", c.data.dir, " holds sequences of ",
                  s->max_len, " tokens but model.block_size is ", c.model.block_size);
      ZT_CHECK_AS(ErrorKind::config, s->vocab_size <= c.model.vocab_size, "[data] ", c.data.dir,
                  " was tokenized with a vocabulary of ", s->vocab_size, " but model.vocab_size is ",
                  c.model.vocab_size);
    }
  }
  int64_t train_size() const override { return train_.size(); }
  MicroBatch gather(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t) const override {
    data::SeqClsBatch b = data::gather_seq_cls(train_, {order.begin() + begin, order.begin() + end});
    return {{b.ids, b.mask}, b.labels, end - begin};
  }
  EvalResult evaluate(const Forward& forward, comm::Group& g, int64_t batch) const override {
    const int64_t n = test_.size(), nb = (n + batch - 1) / batch;
    auto [correct, count] = score_shared(g, nb, [&](int64_t k) {
      std::vector<int64_t> idx;
      for (int64_t i = k * batch; i < std::min(n, (k + 1) * batch); ++i) idx.push_back(i);
      data::SeqClsBatch b = data::gather_seq_cls(test_, idx);
      return std::pair<double, double>(double(ops::count_correct(forward({b.ids, b.mask}), b.labels)),
                                       double(idx.size()));
    });
    const double acc = count > 0 ? correct / count : 0, major = majority_accuracy();
    char line[160];
    std::snprintf(line, sizeof line, "test accuracy: %.4f (%lld/%lld); majority class: %.4f", acc,
                  (long long)std::llround(correct), (long long)std::llround(count), major);
    return {{{"test_accuracy", acc}, {"majority_accuracy", major}}, line};
  }

 private:
  // Test accuracy of always answering the training split's most frequent class.
  double majority_accuracy() const {
    const data::SeqClsSet& from = train_.size() ? train_ : test_;
    const std::vector<int64_t> train_counts = from.class_counts(), test_counts = test_.class_counts();
    const size_t major = size_t(std::max_element(train_counts.begin(), train_counts.end()) - train_counts.begin());
    return test_.size() ? double(test_counts[major]) / double(test_.size()) : 0;
  }
  data::SeqClsSet train_, test_;
};

}  // namespace

std::unique_ptr<Task> make_task(const config::Config& c, bool with_train) {
  const std::string& d = c.data.dataset;
  if (d == "mnist" || d == "fashion-mnist" || d == "cifar10") {
    ZT_CHECK_AS(ErrorKind::config, c.model.type == "mlp" || c.model.type == "cnn", "[config] data.dataset '", d,
                "' needs an image model, not model.type '", c.model.type, "'");
    return std::make_unique<ImageTask>(c, with_train);
  }
  if (d == "tokens") {
    if (c.model.type == "gpt") return std::make_unique<LmTask>(c, with_train);
    ZT_CHECK_AS(ErrorKind::config, c.model.type == "bert" && c.model.head == "mlm",
                "[config] data.dataset 'tokens' trains model.type gpt or bert with model.head mlm, not '", c.model.type,
                "'");
    return std::make_unique<MlmTask>(c, with_train);
  }
  ZT_CHECK_AS(ErrorKind::config, d == "classify" && c.model.type == "bert" && c.model.head == "classify",
              "[config] data.dataset '", d, "' trains model.type bert with model.head classify");
  return std::make_unique<ClassifyTask>(c, with_train);
}

}  // namespace zt::apps
