#pragma once
// Shared by the ZeRO tests: a small MLP with awkward sizes (and one with a layer used one step in
// three), deterministic data, and a training loop where micro-batch m of rank r is rows
// [(m*N + r)*micro, ...) of the step's global batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "zt/autograd/functions.h"
#include "zt/comm/group.h"
#include "zt/core/random.h"
#include "zt/nn/module.h"
#include "zt/zero/engine.h"

namespace zt::testing {

extern comm::GroupPtr g_world;  // the mpirun job's group (mpi_main.cpp)

// 13-19-7-5 MLP: 446 parameters, divisible by neither 3 nor 4.
inline std::shared_ptr<nn::Module> make_model() { return nn::make_mlp(13, {19, 7}, 5, "relu", 1234); }

// x -> relu(A x) -> B, plus C on the same hidden units in the first of every three steps
// (gas = 2 forwards a step). `skip`: C's output is left out on the other steps, so no gradient
// reaches it; else it is added times 0, so a zero gradient does.
class SometimesUsed : public nn::Module {
 public:
  explicit SometimesUsed(bool skip) : skip_(skip) {
    Generator gen(78);
    TagScope tag(MemTag::param);
    a_ = std::make_shared<nn::Linear>(13, 19, true, gen);
    b_ = std::make_shared<nn::Linear>(19, 5, true, gen);
    c_ = std::make_shared<nn::Linear>(19, 5, true, gen);
    register_module("a", a_);
    register_module("b", b_);
    register_module("c", c_);
  }
  const char* type_name() const override { return "SometimesUsed"; }

 protected:
  Tensor forward(const Tensor& x) override {
    const bool used = (calls_++ / 2) % 3 == 0;
    const Tensor h = ag::relu((*a_)(x));
    const Tensor out = (*b_)(h);
    if (!used && skip_) return out;
    return ag::add(out, used ? (*c_)(h) : ag::scale((*c_)(h), 0.f));
  }

 private:
  bool skip_;
  int64_t calls_ = 0;
  std::shared_ptr<nn::Linear> a_, b_, c_;
};

struct Data {
  Tensor x, y;  // all samples of all steps, [rows, 13], [rows]
};

inline Data make_data(int64_t rows) {
  Generator g(99);
  std::vector<float> x(size_t(rows * 13));
  for (auto& v : x) v = g.normal(0.f, 1.f);
  std::vector<int32_t> y(static_cast<size_t>(rows));
  for (auto& v : y) v = int32_t(g.below(5));
  return {Tensor::from_vector(x, {rows, 13}), Tensor::from_ints(y, {rows})};
}

struct RunSpec {
  int stage = 0;
  DType dtype = DType::f32;
  int64_t micro = 3, gas = 2, steps = 20;
  int64_t bucket = 100;  // elements: several buckets, parameters straddling shards
  int64_t persistence = 0;
  bool overlap = true;
  std::string optimizer = "AdamW";  // Adam hides a uniform gradient scale error; SGD does not
  double clip = 1.0;
  std::optional<DType> comm_dtype, accum_dtype;
  int initial_scale_power = 8;  // fp16: small enough that this model never overflows
  bool f32_compute = false;     // Note [f32 compute]
};

// ZT_TEST_DEVICE=sim runs the engine on the sim device (Note [sim device]): the same trajectories,
// and any host read of device memory faults (ctest's *_sim tests).
inline Device test_device() {
  const char* d = std::getenv("ZT_TEST_DEVICE");
  return d && std::string(d) == "sim" ? Device::sim() : Device::cpu();
}

inline zero::EngineOptions options(const RunSpec& s) {
  zero::EngineOptions o;
  o.device = test_device();
  o.zero.stage = s.stage;
  o.dtype = s.dtype;
  o.gradient_accumulation_steps = s.gas;
  o.gradient_clipping = s.clip;
  o.zero.reduce_bucket_size = s.bucket;
  o.zero.overlap_comm = s.overlap;
  o.zero.stage3_prefetch_bucket_size = 200;
  o.zero.stage3_param_persistence_threshold = s.persistence;
  o.communication_data_type = s.comm_dtype;
  o.grad_accum_dtype = s.accum_dtype;
  o.f32_compute = s.f32_compute;
  o.fp16.initial_scale_power = s.initial_scale_power;
  o.optimizer.type = s.optimizer;
  if (s.optimizer == "SGD") o.optimizer.momentum = 0.9f;
  o.optimizer.lr = 1e-2f;
  o.optimizer.weight_decay = 0.01f;
  return o;
}

struct RunResult {
  std::vector<double> losses;              // mean loss per step over the global batch
  std::vector<std::vector<float>> params;  // final full parameters, plan order
  std::vector<zero::StepStats> stats;
};

// One optimizer step's micro-batches on this rank; returns this rank's mean loss.
inline double train_step(zero::Engine& e, const RunSpec& s, const Data& d, int64_t step) {
  const int64_t N = e.group()->size(), r = e.group()->rank(), global = s.micro * s.gas * N;
  double loss_sum = 0;
  for (int64_t m = 0; m < s.gas; ++m) {
    const int64_t b = step * global + (m * N + r) * s.micro;
    const Tensor logits = e.forward(d.x.slice(0, b, b + s.micro));
    Tensor loss = ag::cross_entropy(logits, d.y.slice(0, b, b + s.micro).to(logits.device()));
    loss_sum += loss.item() / double(s.gas);
    e.backward(loss);
  }
  return loss_sum;
}

inline RunResult train(const RunSpec& s, const comm::GroupPtr& group, const Data& d,
                       const std::shared_ptr<nn::Module>& given = nullptr) {
  auto model = given ? given : make_model();
  zero::Engine engine(*model, group, options(s));
  RunResult out;
  for (int64_t step = 0; step < s.steps; ++step) {
    const double loss = train_step(engine, s, d, step);
    out.stats.push_back(engine.step(1e-2));
    out.losses.push_back(group->all_reduce_scalar(loss) / double(group->size()));
  }
  engine.for_each_full_param([&](const std::string&, const Tensor& p) { out.params.push_back(p.to_vector()); });
  return out;
}

// Tolerance of a trajectory against the single-process run, by working dtype, relative to
// max(1, |value|) (Note [16-bit tolerance] in equivalence_mpi_test.cpp); fp32 differs by
// reduction order only.
struct Tolerance {
  double loss, param;
};
inline Tolerance trajectory_tolerance(DType dt) {
  switch (dt) {
    case DType::f32:
      return {1e-5, 1e-5};
    case DType::f16:
      return {2e-4, 1e-2};
    default:
      return {5e-3, 5e-2};
  }
}

inline void expect_close(double a, double b, double tol, const std::string& what) {
  EXPECT_LE(std::abs(a - b), tol * std::max(1.0, std::abs(b))) << what << ": " << a << " vs " << b;
}

inline void expect_same_trajectory(const RunResult& got, const RunResult& want, Tolerance tol) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i)
    expect_close(got.losses[i], want.losses[i], tol.loss, "loss at step " + std::to_string(i + 1));
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t p = 0; p < want.params.size(); ++p)
    for (size_t i = 0; i < want.params[p].size(); ++i)
      expect_close(got.params[p][i], want.params[p][i], tol.param,
                   "parameter " + std::to_string(p) + "[" + std::to_string(i) + "]");
}

// 64 -> 8 x 256 -> 10: eight similar large units, reduce buckets of about one unit (memory
// tests), and a batch of eight rows for it.
inline constexpr int64_t kWideUnit = 256 * 256 + 256;
inline std::shared_ptr<nn::Module> make_wide_model() { return nn::make_mlp(64, std::vector<int64_t>(8, 256), 10, "relu", 7); }
inline Data wide_batch(uint64_t seed) {
  Generator g(seed);
  std::vector<float> xs(8 * 64);
  for (auto& v : xs) v = g.normal(0, 1);
  return {Tensor::from_vector(xs, {8, 64}), Tensor::from_ints({1, 2, 3, 4, 5, 6, 7, 8}, {8})};
}

}  // namespace zt::testing
