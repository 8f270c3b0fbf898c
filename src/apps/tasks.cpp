#include "tasks.h"

#include "models/model_kind.h"
#include "models/shared.h"
#include "session.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/core/random.h"
#include "zt/data/lm_batches.h"
#include "zt/data/mnist.h"
#include "zt/data/ngram.h"
#include "zt/data/seq_cls.h"
#include "zt/data/token_shard.h"
#include "zt/data/token_stream.h"
#include "zt/ops/ops.h"

namespace zt::apps {

Tensor Task::cross_entropy(const Tensor& out, const Tensor& targets) {
  const int64_t classes = out.size(out.dim() - 1);
  const Tensor logits = out.dim() == 2 ? out : ag::reshape(out, {out.numel() / classes, classes});
  return ag::cross_entropy(logits, targets.to(logits.device()));  // targets go up with the batch
}

namespace {

int64_t scored(const Tensor& targets) {  // targets >= 0 (the others are ignored)
  const int32_t* t = targets.data<int32_t>();
  return std::count_if(t, t + targets.numel(), [](int32_t v) { return v >= 0; });
}

// Rows whose target is scored (>= 0) and whose argmax equals it.
int64_t count_correct_scored(const Tensor& logits, const Tensor& targets) {
  const std::vector<float> pred = ops::argmax(logits).to_vector(), want = targets.to_vector();
  int64_t n = 0;
  for (size_t i = 0; i < want.size(); ++i) n += want[i] >= 0 && pred[i] == want[i];
  return n;
}

// Batches 0..n-1 shared over the ranks; every rank runs the same number of forwards (a stage-3
// model gathers collectively), the ones past n scored with weight 0. `score` gives a batch's
// sums (e.g. loss sum, count); returns their totals over all batches and ranks.
std::vector<double> score_shared(comm::Group& g, int64_t n, size_t sums,
                                 const std::function<std::vector<double>(int64_t)>& score) {
  const int64_t world = g.size(), rounds = (n + world - 1) / world;
  std::vector<double> total(sums, 0.0);
  for (int64_t r = 0; r < rounds; ++r) {
    const int64_t k = r * world + g.rank();
    const std::vector<double> v = score(std::min(k, n - 1));
    if (k < n)
      for (size_t i = 0; i < sums; ++i) total[i] += v[i];
  }
  for (size_t i = 0; i < sums; ++i) total[i] = g.all_reduce_scalar(total[i], "evaluation, sum " + std::to_string(i));
  return total;
}

// ---- image classification -------------------------------------------------------------------

class ImageTask : public Task {
 public:
  ImageTask(const config::Config& c, bool with_train) {
    if (with_train) train_ = load_image_split(c, "train");
    if (c.run.eval_at_end || c.data.eval_every > 0 || !with_train) test_ = load_image_split(c, "test");
  }
  int64_t train_size() const override { return train_.size(); }
  // 1000 images, or the whole test split when smaller (what a batch of evaluate() holds).
  int64_t eval_batch(int64_t) const override { return std::clamp<int64_t>(test_.size(), 1, 1000); }
  MicroBatch gather(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t) const override {
    data::Batch b = data::gather_batch(train_, order, begin, end);
    return {{b.x}, b.y, end - begin};
  }
  EvalResult evaluate(const Forward& forward, comm::Group& g, int64_t batch, bool /*whole: always*/) const override {
    const int64_t n = test_.size(), nb = (n + batch - 1) / batch;
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
    const std::vector<double> t = score_shared(g, nb, 2, [&](int64_t k) {
      data::Batch b = data::gather_batch(test_, order, k * batch, std::min(n, (k + 1) * batch));
      const Tensor out = forward({b.x});
      return std::vector<double>{double(ops::count_correct(out, b.y.to(out.device()))), double(b.y.numel())};
    });
    const double correct = t[0], count = t[1];
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

// A split's shards: data.<split>_files' glob, else data.dir/<split>_*.bin; mapped, not read
// (Note [mapped token shards]). `name` gets what stands for them in messages.
data::TokenStream open_split(const config::Config& c, const std::string& split, std::string& name) {
  const std::string& pattern = split == "train" ? c.data.train_files : c.data.val_files;
  name = pattern.empty() ? c.data.dir + "/" + split + "_*.bin" : pattern;
  return data::TokenStream::map_files(pattern.empty() ? data::list_token_shards(c.data.dir, split)
                                                      : data::glob_token_shards(pattern, "data." + split + "_files"));
}

// Windows of `span` tokens at stride `span` (sample i starts at i * span).
class TokenTask : public Task {
 public:
  TokenTask(const config::Config& c, int64_t span, bool with_train)
      : c_(c), vocab_size_(model_kind(c).shape(c).vocab_size), span_(span) {
    // Every token is checked before step 1, in one sequential pass that leaves nothing resident.
    if (with_train) {
      train_ = open_split(c, "train", train_name_);
      data::check_token_range(train_, vocab_size_);
    }
    val_ = open_split(c, "val", val_name_);
    data::check_token_range(val_, vocab_size_);
    n_train_ = windows(train_);
    if (c.data.train_limit > 0) n_train_ = std::min(n_train_, c.data.train_limit);
    n_val_ = windows(val_);  // data.test_limit: the first N validation windows
    if (c.data.test_limit > 0) n_val_ = std::min(n_val_, c.data.test_limit);
    ZT_CHECK_AS(ErrorKind::data, (n_train_ > 0 || !with_train) && windows(val_) > 0, "[data] ", data_name(),
                " holds too few tokens for one sequence of ", span, " (train ", train_.size(), ", val ", val_.size(),
                ")");
  }
  int64_t train_size() const override { return n_train_; }

 protected:
  int64_t windows(const data::TokenStream& t) const { return data::lm_window_count(t.size(), span_); }
  // data.dir, or the globs when they name the shards.
  std::string data_name() const {
    if (c_.data.train_files.empty() && c_.data.val_files.empty()) return c_.data.dir;
    return train_name_ + " and " + val_name_;
  }
  // Validation batches of b windows: the whole split (the last batch shorter), or eval_batches
  // batches of windows spread evenly over it (a periodic estimate that sees every document).
  int64_t val_batches(int64_t b, bool whole) const {
    const int64_t total = n_val_;
    return whole ? (total + b - 1) / b : std::max<int64_t>(1, std::min(c_.data.eval_batches, total / b));
  }
  std::vector<int64_t> val_indices(int64_t k, int64_t b, bool whole) const {
    const int64_t total = n_val_;
    std::vector<int64_t> idx;
    if (whole) {
      for (int64_t i = k * b; i < std::min(total, (k + 1) * b); ++i) idx.push_back(i);
      return idx;
    }
    const int64_t stride = std::max<int64_t>(1, total / (val_batches(b, false) * b));
    for (int64_t i = 0; i < b; ++i) idx.push_back((k * b + i) * stride);
    return idx;
  }
  const config::Config& c_;
  int64_t vocab_size_, span_, n_train_ = 0, n_val_ = 0;
  data::TokenStream train_, val_;
  std::string train_name_, val_name_;
};

// GPT: x = window[0, T), y = window[1, T], every position scored.
class LmTask : public TokenTask {
 public:
  LmTask(const config::Config& c, bool with_train)
      : TokenTask(c, sequence_length(c), with_train) {}
  // The n-gram baselines the validation loss is compared with, computed on the same split.
  std::string describe() const override {
    if (train_.empty()) return {};
    // Counts of the first 2^23 train tokens at most: their distinct bigrams stay in memory (a
    // corpus of billions of tokens would not), and the mapped shards beyond are never read here.
    data::NgramOptions opt;
    opt.max_train_tokens = int64_t(1) << 23;
    const data::NgramBaseline b = data::ngram_baseline(train_, val_, vocab_size_, opt);
    const std::string counted = b.train_tokens < int64_t(train_.size())
                                    ? ", counts of the first " + std::to_string(b.train_tokens) + " train tokens"
                                    : "";
    char line[260];
    std::snprintf(line, sizeof line,
                  "baselines on %s (validation, %lld tokens%s): unigram %.4f, interpolated bigram %.4f nats/token "
                  "(lambda %.2f)",
                  data_name().c_str(), (long long)b.val_tokens, counted.c_str(), b.unigram_loss, b.bigram_loss,
                  b.lambda);
    return line;
  }
  MicroBatch gather(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t) const override {
    std::vector<int64_t> idx(order.begin() + begin, order.begin() + end);
    return make(train_, idx);
  }
  EvalResult evaluate(const Forward& forward, comm::Group& g, int64_t batch, bool whole) const override {
    const int64_t b = std::min<int64_t>(batch, n_val_);
    const std::vector<double> t = score_shared(g, val_batches(b, whole), 2, [&](int64_t k) {
      MicroBatch mb = make(val_, val_indices(k, b, whole));
      const double n = double(mb.targets.numel());
      return std::vector<double>{loss(forward(mb.inputs), mb).item() * n, n};
    });
    const double l = t[0] / t[1], count = t[1];
    char line[128];
    std::snprintf(line, sizeof line, "validation loss: %.4f nats/token (perplexity %.1f, %lld tokens)", l, std::exp(l),
                  (long long)count);
    return {{{"val_loss", l}, {"val_tokens", count}}, line};
  }

 private:
  MicroBatch make(const data::TokenStream& t, const std::vector<int64_t>& idx) const {
    data::LmBatch b = data::lm_batch(t, span_, idx);
    const int64_t n = b.y.numel();
    return {{b.x}, b.y.reshape({n}), int64_t(idx.size())};
  }
};

// BERT masked LM: [CLS] + T-2 tokens + [SEP]; mask_prob of the text tokens are scored, of those
// 80% become [MASK], 10% a random token, 10% stay. Masks depend on (seed, epoch, sample) only,
// so every world size sees the same batch.
class MlmTask : public TokenTask {
 public:
  static constexpr int32_t kCls = 101, kSep = 102, kMask = 103;
  MlmTask(const config::Config& c, bool with_train)
      : TokenTask(c, sequence_length(c) - 2, with_train) {
    ZT_CHECK_AS(ErrorKind::config, span_ >= 1, "[data] masked LM needs data.seq_len >= 3");
    ZT_CHECK_AS(ErrorKind::config, vocab_size_ > kMask, "[config] masked LM needs BERT's vocabulary ([MASK] = ", kMask,
                "); model.vocab_size is ", vocab_size_);
    // Before any step: a validation that scores no token has no loss (every periodic pass is a
    // subset of the whole split, so none of them would either).
    const bool evaluates = c.run.eval_at_end || c.data.eval_every > 0 || !with_train;
    const int64_t n = n_val_;
    ZT_CHECK_AS(ErrorKind::config, !evaluates || scored_rows(val_, 0, n, ~c.seed) > 0, "[data] masked LM: none of the ",
                n, " validation sequences in ", val_name_, " has a masked token at data.mask_prob ", c.data.mask_prob,
                ", so the validation loss is undefined (raise data.mask_prob or hold out more tokens)");
  }
  MicroBatch gather(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t epoch) const override {
    std::vector<int64_t> idx(order.begin() + begin, order.begin() + end);
    return make(train_, idx, epoch_seed(epoch));
  }
  // The number of scored tokens varies by micro-batch: weighting each micro-batch's mean by its
  // share makes the step's loss the mean over the whole global batch, at any world size.
  double weight(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t global_begin, int64_t global_end,
                int64_t epoch) const override {
    const int64_t global = scored_in(order, global_begin, global_end, epoch);
    if (global == 0) return 1.0;
    return double(scored_in(order, begin, end, epoch)) / double(global) * double(global_end - global_begin) /
           double(end - begin);
  }
  EvalResult evaluate(const Forward& forward, comm::Group& g, int64_t batch, bool whole) const override {
    const int64_t b = std::min<int64_t>(batch, n_val_);
    const std::vector<double> t = score_shared(g, val_batches(b, whole), 3, [&](int64_t k) {
      MicroBatch mb = make(val_, val_indices(k, b, whole), ~c_.seed);
      Tensor out = forward(mb.inputs);
      Tensor logits = out.reshape({out.numel() / out.size(2), out.size(2)});
      const double n = double(scored(mb.targets));
      return std::vector<double>{loss(out, mb).item() * n, n, double(count_correct_scored(logits, mb.targets))};
    });
    const double count = t[1], correct = t[2];
    if (count == 0) {  // a periodic pass of windows with no masked token: no loss to report
      char line[160];
      std::snprintf(line, sizeof line,
                    "validation masked-LM loss: undefined (none of the %lld windows has a masked token)",
                    (long long)(val_batches(b, whole) * b));
      return {{{"val_loss", nullptr}, {"val_masked_accuracy", nullptr}, {"val_tokens", 0}}, line};
    }
    const double l = t[0] / count;
    char line[160];
    std::snprintf(line, sizeof line,
                  "validation masked-LM loss: %.4f nats/token, masked-token accuracy %.4f (%lld tokens)", l,
                  correct / count, (long long)count);
    return {{{"val_loss", l}, {"val_masked_accuracy", correct / count}, {"val_tokens", count}}, line};
  }

 private:
  // Row `index` as [CLS] text [SEP] with its masking; y gets the scored targets (-100 elsewhere).
  // Returns how many positions are scored.
  int64_t mask_row(const data::TokenStream& t, int64_t index, uint64_t seed, int32_t* row, int32_t* y) const {
    const int64_t T = span_ + 2;
    Generator gen(seed ^ (uint64_t(index) * 0xD1B54A32D192ED03ull));
    row[0] = kCls;
    row[T - 1] = kSep;
    std::fill(y, y + T, -100);
    t.copy(index * span_, span_, row + 1);
    int64_t n = 0;
    for (int64_t j = 0; j < span_; ++j) {
      const int32_t tok = row[j + 1];
      if (gen.uniform01() >= c_.data.mask_prob) continue;
      y[j + 1] = tok;
      ++n;
      const double u = gen.uniform01();
      if (u < 0.8)
        row[j + 1] = kMask;
      else if (u < 0.9)
        row[j + 1] = int32_t(gen.below(uint64_t(vocab_size_)));
    }
    return n;
  }
  uint64_t epoch_seed(int64_t epoch) const { return c_.seed + uint64_t(epoch) * 0x9E3779B97F4A7C15ull; }
  int64_t scored_in(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t epoch) const {
    std::vector<int32_t> row(size_t(span_ + 2)), y(size_t(span_ + 2));
    int64_t n = 0;
    for (int64_t i = begin; i < end; ++i)
      n += mask_row(train_, order[size_t(i)], epoch_seed(epoch), row.data(), y.data());
    return n;
  }
  // Scored positions of rows [begin, end) of t.
  int64_t scored_rows(const data::TokenStream& t, int64_t begin, int64_t end, uint64_t seed) const {
    std::vector<int32_t> row(size_t(span_ + 2)), y(size_t(span_ + 2));
    int64_t n = 0;
    for (int64_t i = begin; i < end; ++i) n += mask_row(t, i, seed, row.data(), y.data());
    return n;
  }
  MicroBatch make(const data::TokenStream& t, const std::vector<int64_t>& idx, uint64_t seed) const {
    const int64_t T = span_ + 2, b = int64_t(idx.size());
    std::vector<int32_t> x(size_t(b * T)), y(size_t(b * T)), mask(size_t(b * T), 1);
    for (int64_t r = 0; r < b; ++r) mask_row(t, idx[size_t(r)], seed, &x[size_t(r * T)], &y[size_t(r * T)]);
    return {{Tensor::from_ints(x, {b, T}), Tensor::from_ints(mask, {b, T})}, Tensor::from_ints(y, {b * T}), b};
  }
};

// ---- sequence classification (BERT fine-tuning) ----------------------------------------------

// dir/train.bin and dir/test.bin (zerotrain prepare --task sotu-party); inputs {ids, mask}.
class ClassifyTask : public Task {
 public:
  ClassifyTask(const config::Config& c, bool with_train) : test_limit_(c.data.test_limit) {
    const ModelShape m = model_kind(c).shape(c);
    if (with_train) train_ = data::read_seq_cls(c.data.dir + "/train.bin");
    test_ = data::read_seq_cls(c.data.dir + "/test.bin");
    for (const data::SeqClsSet* s : {&train_, &test_}) {
      if (s->size() == 0) continue;
      ZT_CHECK_AS(ErrorKind::config, s->num_classes == m.num_classes, "[data] ", c.data.dir, " has ", s->num_classes,
                  " classes but model.num_classes is ", m.num_classes);
      ZT_CHECK_AS(ErrorKind::config, s->max_len <= m.block_size, "[data] ", c.data.dir, " holds sequences of ",
                  s->max_len, " tokens but model.block_size is ", m.block_size);
      ZT_CHECK_AS(ErrorKind::config, s->vocab_size <= m.vocab_size, "[data] ", c.data.dir,
                  " was tokenized with a vocabulary of ", s->vocab_size, " but model.vocab_size is ", m.vocab_size);
    }
  }
  int64_t train_size() const override { return train_.size(); }
  MicroBatch gather(const std::vector<int64_t>& order, int64_t begin, int64_t end, int64_t) const override {
    data::SeqClsBatch b = data::gather_seq_cls(train_, {order.begin() + begin, order.begin() + end});
    return {{b.ids, b.mask}, b.labels, end - begin};
  }
  EvalResult evaluate(const Forward& forward, comm::Group& g, int64_t batch, bool /*whole: always*/) const override {
    const int64_t all = test_.size(), n = test_limit_ > 0 ? std::min(all, test_limit_) : all;  // data.test_limit
    const int64_t nb = (n + batch - 1) / batch;
    const std::vector<double> t = score_shared(g, nb, 3, [&](int64_t k) {
      std::vector<int64_t> idx;
      for (int64_t i = k * batch; i < std::min(n, (k + 1) * batch); ++i) idx.push_back(i);
      data::SeqClsBatch b = data::gather_seq_cls(test_, idx);
      const Tensor out = forward({b.ids, b.mask});
      const double rows = double(idx.size());
      const MicroBatch mb{{b.ids, b.mask}, b.labels, int64_t(idx.size())};
      return std::vector<double>{double(ops::count_correct(out, b.labels.to(out.device()))), rows,
                                 loss(out, mb).item() * rows};
    });
    const double correct = t[0], count = t[1];
    const double acc = count > 0 ? correct / count : 0, major = majority_accuracy();
    const double mean_loss = count > 0 ? t[2] / count : 0;  // cross-entropy per example, as HF's eval_loss
    char line[200];
    std::snprintf(line, sizeof line, "test accuracy: %.4f (%lld/%lld); majority class: %.4f; test loss %.4f", acc,
                  (long long)std::llround(correct), (long long)std::llround(count), major, mean_loss);
    return {{{"test_accuracy", acc}, {"majority_accuracy", major}, {"test_loss", mean_loss}}, line};
  }

 private:
  int64_t test_limit_ = 0;
  // Test accuracy of always answering the training split's most frequent class.
  double majority_accuracy() const {
    const data::SeqClsSet& from = train_.size() ? train_ : test_;
    const std::vector<int64_t> train_counts = from.class_counts(), test_counts = test_.class_counts();
    const size_t major = size_t(std::max_element(train_counts.begin(), train_counts.end()) - train_counts.begin());
    return test_.size() ? double(test_counts[major]) / double(test_.size()) : 0;
  }
  data::SeqClsSet train_, test_;
};

// prepare's manifest names the tokenizer: shards of the other one would train without error.
// `want` "": any tokenizer (the token range is checked against the vocabulary instead).
void check_tokenizer(const std::string& dir, const std::string& want, const std::string& model) {
  if (want.empty()) return;
  std::ifstream in(dir + "/manifest.json");
  if (!in) return;  // shards written by other tools carry no manifest
  const nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!m.is_object() || !m.contains("tokenizer") || !m["tokenizer"].is_object()) return;
  const nlohmann::json& name = m["tokenizer"].value("name", nlohmann::json());
  if (!name.is_string()) return;
  const std::string got = name.get<std::string>();
  ZT_CHECK_AS(ErrorKind::config, got == want, "[config] ", dir, " was tokenized with ", got, " (", dir,
              "/manifest.json); model.type ", model, " needs ", want, " tokens (zerotrain prepare --tokenizer ", want,
              ")");
}

}  // namespace

std::unique_ptr<Task> make_task(const config::Config& c, bool with_train) {
  return model_kind(c).task(c, with_train);
}

bool is_image_dataset(const std::string& d) { return d == "mnist" || d == "fashion-mnist" || d == "cifar10"; }

void refuse_dataset(const config::Config& c, const std::string& takes) {
  ZT_THROW_AS(ErrorKind::config, "[config] data.dataset '", c.data.dataset, "' cannot train model.type '",
              c.model.type, "' (it trains on ", takes, ")");
}

std::unique_ptr<Task> make_image_task(const config::Config& c, bool with_train) {
  if (!is_image_dataset(c.data.dataset)) refuse_dataset(c, "images: mnist, fashion-mnist or cifar10");
  return std::make_unique<ImageTask>(c, with_train);
}

std::unique_ptr<Task> make_token_task(const config::Config& c, const std::string& tokenizer, bool with_train) {
  if (c.data.dataset != "tokens") refuse_dataset(c, "tokens");
  const int64_t block = model_kind(c).shape(c).block_size, T = c.data.seq_len > 0 ? c.data.seq_len : block;
  ZT_CHECK_AS(ErrorKind::config, T <= block, "[config] data.seq_len ", T, " exceeds model.block_size ", block,
              " (the model has positions for block_size tokens)");
  // prepare's manifest sits in data.dir; shards named by globs (llm.c's) carry none.
  if (c.data.train_files.empty() && c.data.val_files.empty()) check_tokenizer(c.data.dir, tokenizer, c.model.type);
  if (tokenizer == "bert") return std::make_unique<MlmTask>(c, with_train);
  return std::make_unique<LmTask>(c, with_train);
}

std::unique_ptr<Task> make_classify_task(const config::Config& c, bool with_train) {
  if (c.data.dataset != "classify") refuse_dataset(c, "classify");
  return std::make_unique<ClassifyTask>(c, with_train);
}

}  // namespace zt::apps
