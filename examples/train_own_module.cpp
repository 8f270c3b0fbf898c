// Training a module of one's own with ZeRO, through the installed library: a GEGLU classifier
// (two gated blocks, each one ZeRO-3 unit) learns a teacher network's labels. Every rank runs this
// program (mpirun -np N); the zero::Engine shards what the stage says and the trajectory follows
// one process with the same global batch. Prints one JSON line a step on rank 0, then the
// parameters' sum of squares, so runs at several N and stages can be compared.
//
//   train_own_module [--stage 0-3] [--steps K] [--bf16]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "zt/autograd/functions.h"
#include "zt/comm/group.h"
#include "zt/core/error.h"
#include "zt/core/random.h"
#include "zt/nn/module.h"
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

int run(int argc, char** argv) {
  int stage = 0, steps = 20;
  bool bf16 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--stage" && i + 1 < argc) {
      stage = std::atoi(argv[++i]);
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--bf16") {
      bf16 = true;
    } else {
      std::fprintf(stderr, "usage: train_own_module [--stage 0-3] [--steps K] [--bf16] (got '%s')\n", a.c_str());
      return 2;
    }
  }
  // mpirun's ranks find each other (shm on one node, mpi across nodes); alone: one local rank.
  zt::comm::GroupPtr group = zt::comm::make_group("auto");
  const int64_t world = group->size(), rank = group->rank();
  ZT_CHECK(kGlobalBatch % world == 0, "the global batch of ", kGlobalBatch, " does not split over ", world, " ranks");
  const int64_t micro = kGlobalBatch / world;

  GegluClassifier model(kIn, 32, kClasses, /*seed=*/7);
  zt::zero::EngineOptions opts;
  opts.zero.stage = stage;
  opts.dtype = bf16 ? zt::DType::bf16 : zt::DType::f32;
  opts.optimizer.type = "AdamW";
  opts.optimizer.lr = 3e-3;
  opts.gradient_clipping = 1.0;
  zt::zero::Engine engine(model, group, opts);

  std::vector<float> xs;
  std::vector<int32_t> ys;
  make_data(int64_t(steps) * kGlobalBatch, xs, ys);
  const Tensor x_all = Tensor::from_vector(xs, {int64_t(ys.size()), kIn});
  const Tensor y_all = Tensor::from_ints(ys, {int64_t(ys.size())});
  for (int step = 0; step < steps; ++step) {
    const int64_t begin = int64_t(step) * kGlobalBatch + rank * micro;  // this rank's share of the step
    const Tensor logits = engine.forward(x_all.slice(0, begin, begin + micro));
    Tensor loss = ag::cross_entropy(logits, y_all.slice(0, begin, begin + micro));
    const double mean = group->all_reduce_scalar(loss.item()) / double(world);
    engine.backward(loss);
    const zt::zero::StepStats st = engine.step(opts.optimizer.lr);
    if (rank == 0) std::printf("{\"step\": %d, \"loss\": %.9g, \"grad_norm\": %.9g}\n", step + 1, mean, st.grad_norm);
  }
  double sum_sq = 0;  // every rank takes part: stage 3 gathers each unit
  engine.for_each_full_param([&](const std::string&, const Tensor& p) {
    for (float v : p.to_vector()) sum_sq += double(v) * v;
  });
  if (rank == 0)
    std::printf("{\"world\": %lld, \"stage\": %d, \"params_sum_sq\": %.9g}\n", (long long)world, stage, sum_sq);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const zt::Error& e) {
    std::fprintf(stderr, "train_own_module: error: %s\n", e.what());
    return 1;
  }
}
