// Training a module of one's own with ZeRO, through the installed library: a GEGLU classifier
// (two gated blocks, each one ZeRO-3 unit) learns a teacher network's labels. Every rank runs this
// program (mpirun -np N); zero::Engine shards what the stage says, and the train layer (Note [train
// layer]) does what `zerotrain train` does around it: the memory plan (offload "auto" under
// --budget-kb), micro-batches sent ahead to a device, stops every rank agrees on (SIGTERM, a loss
// that is not finite), checkpoints every K steps and resume, the progress line and metrics as JSON
// lines. Prints one JSON line a step on rank 0, then the parameters' sum of squares, so runs at
// several N and stages can be compared.
//
//   train_own_module [--stage 0-3] [--steps K] [--bf16] [--budget-kb K] [--ckpt DIR --every K [--resume]]
//                    [--metrics FILE]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zt/autograd/functions.h"
#include "zt/comm/group.h"
#include "zt/core/allocator.h"
#include "zt/core/error.h"
#include "zt/core/random.h"
#include "zt/nn/module.h"
#include "zt/train/batches.h"
#include "zt/train/checkpoints.h"
#include "zt/train/memory_fit.h"
#include "zt/train/progress.h"
#include "zt/train/stops.h"
#include "zt/zero/engine.h"

namespace {

using zt::Tensor;
namespace ag = zt::ag;
namespace nn = zt::nn;

// x -> x + down(gelu(gate(x)) * up(x)): a GEGLU block with a residual, as in many modern MLPs.
class GegluBlock : public nn::Module {
 public:
  GegluBlock(int64_t width, int64_t hidden, zt::Generator& gen)
      : gate_(std::make_shared<nn::Linear>(width, hidden, true, gen)),
        up_(std::make_shared<nn::Linear>(width, hidden, false, gen)),
        down_(std::make_shared<nn::Linear>(hidden, width, true, gen)) {
    register_module("gate", gate_);
    register_module("up", up_);
    register_module("down", down_);
    set_zero_unit(true);  // stage 3 gathers the block's three weights together, just in time
  }
  const char* type_name() const override { return "GegluBlock"; }

 protected:
  Tensor forward(const Tensor& x) override { return ag::add(x, (*down_)(ag::mul(ag::gelu((*gate_)(x)), (*up_)(x)))); }

 private:
  std::shared_ptr<nn::Linear> gate_, up_, down_;
};

class GegluClassifier : public nn::Module {
 public:
  GegluClassifier(int64_t in, int64_t width, int64_t classes, uint64_t seed) {
    zt::Generator gen(seed);
    embed_ = std::make_shared<nn::Linear>(in, width, true, gen);
    blocks_ = {std::make_shared<GegluBlock>(width, 2 * width, gen),
               std::make_shared<GegluBlock>(width, 2 * width, gen)};
    head_ = std::make_shared<nn::Linear>(width, classes, true, gen);
    register_module("embed", embed_);
    for (size_t i = 0; i < blocks_.size(); ++i) register_module("block" + std::to_string(i), blocks_[i]);
    register_module("head", head_);
  }
  const char* type_name() const override { return "GegluClassifier"; }

 protected:
  Tensor forward(const Tensor& x) override {
    Tensor h = (*embed_)(x);
    for (auto& b : blocks_) h = (*b)(h);
    return (*head_)(h);
  }

 private:
  std::shared_ptr<nn::Linear> embed_, head_;
  std::vector<std::shared_ptr<GegluBlock>> blocks_;
};

constexpr int64_t kIn = 16, kClasses = 4, kGlobalBatch = 48;

// Samples [n, kIn] and the labels a fixed random linear teacher gives them: the same on every rank.
void make_data(int64_t n, std::vector<float>& x, std::vector<int32_t>& y) {
  zt::Generator gen(2026);
  std::vector<float> teacher(size_t(kClasses * kIn));
  for (float& w : teacher) w = gen.normal(0.f, 1.f);
  x.resize(size_t(n * kIn));
  y.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    int32_t best = 0;
    float best_score = -1e30f;
    for (int64_t k = 0; k < kIn; ++k) x[size_t(i * kIn + k)] = gen.normal(0.f, 1.f);
    for (int32_t c = 0; c < kClasses; ++c) {
      float s = 0;
      for (int64_t k = 0; k < kIn; ++k) s += teacher[size_t(c * kIn + k)] * x[size_t(i * kIn + k)];
      if (s > best_score) best = c, best_score = s;
    }
    y[size_t(i)] = best;
  }
}

struct Args {
  int stage = 0, steps = 20;
  bool bf16 = false, resume = false;
  int64_t budget_kb = 0, every = 0;
  std::string ckpt, metrics;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--stage" && has_value) {
      a.stage = std::atoi(argv[++i]);
    } else if (k == "--steps" && has_value) {
      a.steps = std::atoi(argv[++i]);
    } else if (k == "--budget-kb" && has_value) {
      a.budget_kb = std::atoll(argv[++i]);
    } else if (k == "--ckpt" && has_value) {
      a.ckpt = argv[++i];
    } else if (k == "--every" && has_value) {
      a.every = std::atoll(argv[++i]);
    } else if (k == "--metrics" && has_value) {
      a.metrics = argv[++i];
    } else if (k == "--bf16") {
      a.bf16 = true;
    } else if (k == "--resume") {
      a.resume = true;
    } else {
      throw zt::Error(
          "usage: train_own_module [--stage 0-3] [--steps K] [--bf16] [--budget-kb K] [--ckpt DIR "
          "--every K [--resume]] [--metrics FILE] (got '" +
          k + "')");
    }
  }
  ZT_CHECK(a.ckpt.empty() == (a.every == 0) && (!a.resume || !a.ckpt.empty()),
           "--ckpt DIR and --every K go together, and --resume needs them");
  return a;
}

int run(const Args& a) {
  namespace train = zt::train;
  train::install_stop_signals();  // SIGTERM and SIGINT stop every rank at the next vote
  // mpirun's ranks find each other (shm on one node, mpi across nodes); alone: one local rank.
  zt::comm::GroupPtr group = zt::comm::make_group("auto");
  const int64_t world = group->size(), rank = group->rank();
  ZT_CHECK(kGlobalBatch % world == 0, "the global batch of ", kGlobalBatch, " does not split over ", world, " ranks");
  const int64_t micro = kGlobalBatch / world;

  GegluClassifier model(kIn, 32, kClasses, /*seed=*/7);
  zt::zero::EngineOptions opts;
  opts.zero.stage = a.stage;
  opts.dtype = a.bf16 ? zt::DType::bf16 : zt::DType::f32;
  opts.optimizer.type = "AdamW";
  opts.optimizer.lr = 3e-3;
  opts.gradient_clipping = 1.0;
  if (a.budget_kb > 0) {  // Note [memory fit]: the least offload that fits, swap files under the checkpoints' folder
    opts.zero.offload_optimizer.device = "auto";
    opts.zero.offload_optimizer.nvme_path = (a.ckpt.empty() ? std::string("/tmp") : a.ckpt) + "/swap";
    opts.zero.sub_group_size = 1024;
  }
  // The activations of one micro-batch, about: each block's three products and their gradients, f32.
  const int64_t activations = micro * (kIn + 2 * (32 + 3 * 64) + kClasses) * 4 * 2;
  const train::MemoryFit fit = train::fit_memory(model, opts, int(world), a.budget_kb << 10, activations);
  if (rank == 0)
    for (const std::string& line : fit.lines) std::fprintf(stderr, "train_own_module: %s\n", line.c_str());
  if (rank == 0)  // what the plan chose, as JSON for examples/check.py
    std::printf("%s\n", nlohmann::json({{"placement", zt::zero::describe(zt::zero::placement_of(fit.options))},
                                        {"peak_bytes", fit.peak.in_use()}})
                            .dump()
                            .c_str());
  zt::zero::Engine engine(model, group, fit.options);

  train::Checkpoints checkpoints(engine, {a.ckpt, a.every, 2, false}, [&](const std::string& path) {
    if (rank == 0) std::fprintf(stderr, "train_own_module: checkpoint %s\n", path.c_str());
  });
  int64_t first = 0;
  if (a.resume) first = checkpoints.resume("latest").value("step", int64_t(0));

  std::vector<float> xs;
  std::vector<int32_t> ys;
  make_data(int64_t(a.steps) * kGlobalBatch, xs, ys);
  const Tensor x_all = Tensor::from_vector(xs, {int64_t(ys.size()), kIn});
  const Tensor y_all = Tensor::from_ints(ys, {int64_t(ys.size())});
  // This rank's share of step k, sent ahead to a device while the step before computes.
  train::BatchPrefetcher batches(engine.policy().device, [&](train::BatchKey k) {
    const int64_t begin = k.step * kGlobalBatch + rank * micro;
    return train::MicroBatch{{x_all.slice(0, begin, begin + micro)}, y_all.slice(0, begin, begin + micro), micro};
  });
  train::Pace pace(first, a.steps, kGlobalBatch);
  for (int64_t step = first; step < a.steps; ++step) {
    const std::optional<train::BatchKey> next =
        step + 1 < a.steps ? std::optional<train::BatchKey>({step + 1, 0}) : std::nullopt;
    const train::MicroBatch b = batches.take({step, 0}, next);
    Tensor loss = ag::cross_entropy(engine.forward(b.inputs[0]), b.targets);
    const double mean = group->all_reduce_scalar(loss.item()) / double(world);
    engine.backward(loss);
    const zt::zero::StepStats st = engine.step(opts.optimizer.lr);
    const std::string when = "at step " + std::to_string(step + 1) + " of " + std::to_string(a.steps);
    const train::Vote vote = train::agree(*group, {train::stop_signal(), std::isfinite(mean) ? -1 : int(rank)}, when);
    if (vote.stops()) checkpoints.before_stop();
    train::stop_if_voted(vote, when,
                         checkpoints.last().empty() ? "" : "; the last checkpoint is " + checkpoints.last());
    checkpoints.after_step(step + 1, a.steps, {{"global_batch", kGlobalBatch}});
    if (rank != 0) continue;
    const train::Pace::Report r = pace.report(step + 1);
    const nlohmann::json rec = {
        {"step", step + 1}, {"loss", mean}, {"grad_norm", st.grad_norm}, {"samples_per_s", r.samples_per_s}};
    std::printf("%s\n",
                nlohmann::json({{"step", step + 1}, {"loss", mean}, {"grad_norm", st.grad_norm}}).dump().c_str());
    if (!a.metrics.empty()) train::append_json_line(a.metrics, rec, zt::ErrorKind::checkpoint, "train_own_module:");
    train::ProgressLine line{step + 1,
                             a.steps,
                             double(step + 1) / a.steps,
                             mean,
                             opts.optimizer.lr,
                             st.grad_norm,
                             std::nullopt,
                             std::to_string(int64_t(r.samples_per_s)) + " samples/s",
                             r.eta_s,
                             zt::format_bytes(zt::Allocator::global().stats().total_current) + " in use"};
    std::fprintf(stderr, "%s\n", train::format(line).c_str());
  }
  checkpoints.finish();
  double sum_sq = 0;  // every rank takes part: stage 3 gathers each unit
  engine.for_each_full_param([&](const std::string&, const Tensor& p) {
    for (float v : p.to_vector()) sum_sq += double(v) * v;
  });
  if (rank == 0)
    std::printf("{\"world\": %lld, \"stage\": %d, \"params_sum_sq\": %.9g}\n", (long long)world, a.stage, sum_sq);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const zt::AgreedError& e) {  // every rank stopped together; rank 0 says why
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!r || std::atoi(r) == 0) std::fprintf(stderr, "train_own_module: %s\n", e.what());
    return e.exit_code();
  } catch (const zt::Error& e) {
    std::fprintf(stderr, "train_own_module: error: %s\n", e.what());
    return 1;
  }
}
