// optim::update against PyTorch 1.13 golden trajectories (tests/golden/optim.json, written by
// tests/optim/gen_optim_golden.py) in f32 and mixed precision, on both sides of the grain.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "../common/error_of.h"
#include "zt/core/allocator.h"
#include "zt/core/parallel.h"
#include "zt/optim/optimizer.h"

namespace zt::optim {
namespace {

using nlohmann::json;

const json& golden() {
  static const json j = [] {
    std::ifstream f(std::string(ZT_SOURCE_DIR) + "/tests/golden/optim.json");
    EXPECT_TRUE(f.good()) << "missing tests/golden/optim.json";
    return json::parse(f);
  }();
  return j;
}

config::OptimizerConfig spec_of(const json& c) {
  config::OptimizerConfig s;
  s.type = c["spec"]["type"].get<std::string>();
  s.lr = c["lrs"][0].get<float>();
  s.beta1 = golden()["beta1"].get<float>();
  s.beta2 = golden()["beta2"].get<float>();
  s.eps = golden()["eps"].get<float>();
  s.weight_decay = c["spec"].value("weight_decay", 0.0f);
  s.momentum = c["spec"].value("momentum", 0.0f);
  s.nesterov = c["spec"].value("nesterov", false);
  return s;
}

// `reps` copies of a 7-element vector, so a large `reps` exercises the parallel path.
Tensor repeated(const std::vector<float>& v, int64_t reps, DType dt) {
  std::vector<float> out;
  for (int64_t r = 0; r < reps; ++r) out.insert(out.end(), v.begin(), v.end());
  return Tensor::from_vector(out, {int64_t(out.size())}, dt);
}

std::vector<Tensor> zero_states(const config::OptimizerConfig& s, int64_t n) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < state_names(s).size(); ++k) out.push_back(Tensor::zeros({n}));
  return out;
}

void expect_near_all(const Tensor& t, const std::vector<float>& want, float rel, const std::string& what) {
  const auto got = t.to_vector();
  const size_t k = want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const float w = want[i % k];
    ASSERT_NEAR(got[i], w, rel * std::max(1.f, std::fabs(w))) << what << " elem " << i;
  }
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Every golden case: the fp32 weights (master, or f32 params) within 1e-6 of torch; with a
// master, params are exactly the master rounded and within one ulp of their dtype of torch's.
void check_golden(int64_t reps) {
  set_num_threads(2);  // make the parallel branch really split across threads
  ASSERT_EQ(golden()["cases"].size(), 20u);
  for (const auto& c : golden()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const config::OptimizerConfig spec = spec_of(c);
    const DType pd = dtype_from_name(c["param_dtype"].get<std::string>());
    const DType gd = dtype_from_name(c["grad_dtype"].get<std::string>());
    const auto init = c["init"].get<std::vector<float>>();
    UpdateArgs a;
    a.param = repeated(init, reps, pd);
    if (c["master"].get<bool>()) a.master = repeated(init, reps, DType::f32);
    const int64_t n = a.param.numel();
    a.states = zero_states(spec, n);
    a.grad_scale = c["grad_scale"].get<float>();
    const float ulp = pd == DType::bf16 ? 1.f / 128 : pd == DType::f16 ? 1.f / 1024 : 1e-6f;
    for (size_t s = 0; s < c["lrs"].size(); ++s) {
      a.grad = repeated(c["grads"][s].get<std::vector<float>>(), reps, gd);
      a.lr = c["lrs"][s].get<float>();
      a.step = int64_t(s) + 1;
      update(spec, a);
      const auto want = c["params"][s].get<std::vector<float>>();
      expect_near_all(a.master.defined() ? a.master : a.param, want, 1e-6f, "step " + std::to_string(s));
      if (a.master.defined()) {
        ASSERT_TRUE(bitwise_equal(a.param, a.master.to(pd))) << "param is not round(master) at step " << s;
        expect_near_all(a.param, c["low_params"][s].get<std::vector<float>>(), ulp,
                        "low param step " + std::to_string(s));
      }
    }
    const auto names = state_names(spec);
    ASSERT_EQ(names.size(), c["final_state"].size());
    for (size_t k = 0; k < names.size(); ++k) {
      ASSERT_TRUE(c["final_state"].contains(names[k])) << names[k];
      expect_near_all(a.states[k], c["final_state"][names[k]].get<std::vector<float>>(), 1e-6f, names[k]);
    }
  }
}

TEST(Update, MatchesTorchGoldenBelowTheGrain) {
  static_assert(7 * 3 <= kOptimGrain);
  check_golden(3);
}

TEST(Update, MatchesTorchGoldenAboveTheGrain) { check_golden(kOptimGrain / 7 * 3 + 5); }

struct Variant {
  const char* type;
  float wd, momentum;
  bool nesterov;
};
const Variant kVariants[] = {{"Adam", 0, 0, false},       {"Adam", 0.05f, 0, false}, {"AdamW", 0.05f, 0, false},
                             {"SGD", 0, 0, false},        {"SGD", 0.05f, 0, false},  {"SGD", 0, 0.8f, false},
                             {"SGD", 0.05f, 0.8f, false}, {"SGD", 0.05f, 0.8f, true}};
struct Precision {
  DType param, grad;
  bool master;
};
const Precision kPrecisions[] = {{DType::f32, DType::f32, false},  {DType::f32, DType::bf16, false},
                                 {DType::bf16, DType::bf16, true}, {DType::f16, DType::f16, true},
                                 {DType::bf16, DType::f32, true},  {DType::f16, DType::bf16, true}};

config::OptimizerConfig spec_of(const Variant& v) {
  config::OptimizerConfig s;
  s.type = v.type;
  s.weight_decay = v.wd;
  s.momentum = v.momentum;
  s.nesterov = v.nesterov;
  return s;
}

// Three updates of n elements, in pieces of `piece` elements each, on `threads` threads.
// Returns param, master and states (and with `widen` the f32 copy the updates wrote beside them).
std::vector<Tensor> run_pieces(const config::OptimizerConfig& s, const Precision& pr, int64_t n, int64_t piece,
                               int threads, bool widen = false) {
  set_num_threads(threads);
  std::vector<float> p(static_cast<size_t>(n)), g(p.size());
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = std::sin(0.01f * float(i));
  Tensor param = Tensor::from_vector(p, {n}, pr.param), master = pr.master ? param.to(DType::f32) : Tensor();
  std::vector<Tensor> states = zero_states(s, n);
  Tensor widened = widen ? Tensor::full({n}, -7.f) : Tensor();
  for (int step = 1; step <= 3; ++step) {
    for (int64_t i = 0; i < n; ++i) g[size_t(i)] = 50.f * std::cos(0.003f * float(i * step));
    Tensor grad = Tensor::from_vector(g, {n}, pr.grad);
    for (int64_t b = 0; b < n; b += piece) {
      const int64_t e = std::min(n, b + piece);
      UpdateArgs a;
      a.param = param.slice(0, b, e);
      if (master.defined()) a.master = master.slice(0, b, e);
      if (widen) a.widened = widened.slice(0, b, e);
      a.grad = grad.slice(0, b, e);
      for (auto& t : states) a.states.push_back(t.slice(0, b, e));
      a.lr = 0.01f;
      a.step = step;
      a.grad_scale = 0.02f;
      update(s, a);
    }
  }
  std::vector<Tensor> out{param};
  if (master.defined()) out.push_back(master);
  out.insert(out.end(), states.begin(), states.end());
  if (widen) out.push_back(widened);
  return out;
}

// Element-wise updates: the same elements updated in one call above the grain (parallel) or
// in pieces below it (serial, aligned or not), on 1 or 2 threads, give bit-identical results.
TEST(Update, ResultsDoNotDependOnChunkingOrThreads) {
  const int64_t n = 2 * kOptimGrain + 123;
  for (const Variant& v : kVariants) {
    for (const Precision& pr : kPrecisions) {
      SCOPED_TRACE(std::string(v.type) + " wd " + std::to_string(v.wd) + " mom " + std::to_string(v.momentum) +
                   " param " + dtype_name(pr.param) + " grad " + dtype_name(pr.grad));
      const config::OptimizerConfig s = spec_of(v);
      const auto whole2 = run_pieces(s, pr, n, n, 2), whole1 = run_pieces(s, pr, n, n, 1);
      const auto pieces = run_pieces(s, pr, n, kOptimGrain / 2, 2);
      // Pieces that start off a cache line: Note [streamed params]'s unaligned head and tail.
      const auto odd = run_pieces(s, pr, n, 1003, 1);
      ASSERT_EQ(whole2.size(), pieces.size());
      for (size_t k = 0; k < whole2.size(); ++k) {
        EXPECT_TRUE(bitwise_equal(whole2[k], pieces[k])) << "tensor " << k;
        EXPECT_TRUE(bitwise_equal(whole2[k], whole1[k])) << "tensor " << k;
        EXPECT_TRUE(bitwise_equal(whole2[k], odd[k])) << "tensor " << k;
      }
    }
  }
}

// Note [widened by the update]: beside a master the update can write the rounded param's f32
// value too; it equals widening the param afterwards, bit for bit, whole or in pieces that start
// off a cache line (the streamed spans and the head), and changes nothing else.
TEST(Update, TheWidenedCopyIsTheRoundedParamAsF32) {
  const int64_t n = 2 * kOptimGrain + 123;
  for (const Variant& v : kVariants) {
    for (const Precision& pr : kPrecisions) {
      if (!pr.master) continue;
      SCOPED_TRACE(std::string(v.type) + " param " + dtype_name(pr.param) + " grad " + dtype_name(pr.grad));
      const config::OptimizerConfig s = spec_of(v);
      const auto plain = run_pieces(s, pr, n, n, 2);
      for (int64_t piece : {n, int64_t(1003)}) {
        const auto wide = run_pieces(s, pr, n, piece, 2, /*widen=*/true);
        ASSERT_EQ(wide.size(), plain.size() + 1);
        for (size_t k = 0; k < plain.size(); ++k) EXPECT_TRUE(bitwise_equal(plain[k], wide[k])) << "tensor " << k;
        EXPECT_TRUE(bitwise_equal(wide.back(), plain[0].to(DType::f32))) << "piece " << piece;
      }
    }
  }
  UpdateArgs a;  // only beside a master, and only in f32
  a.param = Tensor::full({4}, 1.f);
  a.grad = Tensor::full({4}, 1.f);
  a.states = zero_states(spec_of(kVariants[0]), 4);
  a.widened = Tensor::full({4}, 0.f);
  EXPECT_EQ(testing_util::error_of([&] { update(spec_of(kVariants[0]), a); }),
            "[optim.update] a widened copy needs a master (f32 params are their own)");
  a.param = a.param.to(DType::bf16);
  a.master = Tensor::full({4}, 1.f);
  a.widened = Tensor::full({4}, 0.f, DType::bf16);
  EXPECT_EQ(testing_util::error_of([&] { update(spec_of(kVariants[0]), a); }),
            "[optim.update] widened must be f32, got bf16");
}

// grad_scale is one float multiply: scaling inside equals pre-scaling an f32 gradient.
TEST(Update, GradScaleEqualsPrescaledGradient) {
  for (const Variant& v : kVariants) {
    const config::OptimizerConfig s = spec_of(v);
    const int64_t n = 257;
    std::vector<float> g(n);
    for (int64_t i = 0; i < n; ++i) g[size_t(i)] = 1000.f * std::sin(float(i));
    const float scale = 0.37f / 1024;
    UpdateArgs a, b;
    a.param = Tensor::full({n}, 0.5f), b.param = Tensor::full({n}, 0.5f);
    a.states = zero_states(s, n), b.states = zero_states(s, n);
    a.grad = Tensor::from_vector(g, {n});
    for (auto& x : g) x *= scale;
    b.grad = Tensor::from_vector(g, {n});
    a.grad_scale = scale;
    a.lr = b.lr = 0.01f;
    for (int step = 1; step <= 2; ++step) {
      a.step = b.step = step;
      update(s, a);
      update(s, b);
    }
    EXPECT_TRUE(bitwise_equal(a.param, b.param)) << v.type;
  }
}

// An f32 master beside f32 params follows exactly the in-place f32 trajectory.
TEST(Update, F32MasterMatchesInPlaceF32) {
  for (const Variant& v : kVariants) {
    const config::OptimizerConfig s = spec_of(v);
    const auto plain = run_pieces(s, {DType::f32, DType::f32, false}, 100, 100, 1);
    const auto with_master = run_pieces(s, {DType::f32, DType::f32, true}, 100, 100, 1);
    EXPECT_TRUE(bitwise_equal(plain[0], with_master[0])) << v.type;
    EXPECT_TRUE(bitwise_equal(plain[0], with_master[1])) << v.type;
  }
}

// Restoring the states and continuing at the next step number continues the same trajectory.
TEST(Update, ResumeFromCopiedStatesMatchesUninterrupted) {
  for (const Variant& v : kVariants) {
    const config::OptimizerConfig s = spec_of(v);
    const int64_t n = 9;
    UpdateArgs a;
    a.param = Tensor::full({n}, 0.5f);
    a.states = zero_states(s, n);
    a.lr = 0.1f;
    auto grad = [&](int step) {
      std::vector<float> g(n);
      for (int64_t i = 0; i < n; ++i) g[size_t(i)] = float(i - 4) * 0.1f + float(step);
      return Tensor::from_vector(g, {n});
    };
    UpdateArgs b = a;
    for (int step = 1; step <= 4; ++step) {
      if (step == 3) {  // b resumes from a's state after two updates
        b.param = a.param.clone();
        b.states.clear();
        for (auto& t : a.states) b.states.push_back(t.clone());
      }
      a.grad = grad(step), a.step = step;
      update(s, a);
      if (step >= 3) b.grad = grad(step), b.step = step, update(s, b);
    }
    EXPECT_TRUE(bitwise_equal(a.param, b.param)) << v.type;
  }
}

// As torch's lazy momentum_buffer: step 1 sets the buffer to the gradient, whatever it held.
TEST(Update, SgdStepOneInitialisesMomentumFromTheGradient) {
  config::OptimizerConfig s = spec_of(Variant{"SGD", 0.f, 0.9f, false});
  UpdateArgs a;
  a.param = Tensor::full({4}, 1.f);
  a.grad = Tensor::full({4}, 0.25f);
  a.states = {Tensor::full({4}, 7.f)};
  a.lr = 0.1f;
  update(s, a);
  EXPECT_EQ(a.states[0].to_vector(), std::vector<float>(4, 0.25f));
  a.step = 2;
  update(s, a);
  EXPECT_EQ(a.states[0].to_vector(), std::vector<float>(4, 0.25f * 0.9f + 0.25f));
}

TEST(Update, ZeroElementsIsANoOp) {
  config::OptimizerConfig s;
  UpdateArgs a;
  a.param = Tensor::empty({0});
  a.grad = Tensor::empty({0});
  a.states = zero_states(s, 0);
  EXPECT_NO_THROW(update(s, a));
}

TEST(StateNames, FollowTheOptimizerAndSizeItsState) {
  struct Case {
    const char* type;
    float momentum;
    std::vector<std::string> names;
  };
  for (const Case& c : {Case{"Adam", 0.f, {"exp_avg", "exp_avg_sq"}}, Case{"adamw", 0.f, {"exp_avg", "exp_avg_sq"}},
                        Case{"SGD", 0.9f, {"momentum_buffer"}}, Case{"sgd", 0.f, {}}}) {
    config::OptimizerConfig s;
    s.type = c.type;
    s.momentum = c.momentum;
    EXPECT_EQ(state_names(s), c.names) << c.type;
    EXPECT_EQ(state_bytes_per_elem(s), 4 * int64_t(c.names.size())) << c.type;
  }
}

void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no error, expected: " << part;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Validate, RejectsBadSpecsAsConfigErrors) {
  auto bad = [](auto edit, const std::string& part) {
    config::OptimizerConfig s;
    edit(s);
    expect_error([&] { validate(s); }, ErrorKind::config, part);
    expect_error([&] { state_names(s); }, ErrorKind::config, part);
  };
  bad([](config::OptimizerConfig& s) { s.type = "Lamb"; }, "unknown optimizer type 'Lamb' (allowed: Adam, AdamW, SGD)");
  bad([](config::OptimizerConfig& s) { s.lr = -1.f; }, "lr must be >= 0");
  bad([](config::OptimizerConfig& s) { s.beta2 = 1.f; }, "beta2 must be in [0, 1)");
  bad([](config::OptimizerConfig& s) { s.eps = NAN; }, "eps must be >= 0");
  bad([](config::OptimizerConfig& s) { s.type = "SGD", s.nesterov = true; }, "nesterov requires momentum > 0");
  bad([](config::OptimizerConfig& s) { s.type = "SGD", s.momentum = -1; }, "momentum must be >= 0");
  bad([](config::OptimizerConfig& s) { s.weight_decay = -0.1f; }, "weight_decay must be >= 0");
  EXPECT_NO_THROW(validate(config::OptimizerConfig{}));
}

TEST(Update, RejectsBadArguments) {
  const config::OptimizerConfig adam;
  auto good = [&] {
    UpdateArgs a;
    a.param = Tensor::zeros({6});
    a.grad = Tensor::zeros({6});
    a.states = zero_states(adam, 6);
    return a;
  };
  auto bad = [&](auto edit, const std::string& part) {
    UpdateArgs a = good();
    edit(a);
    expect_error([&] { update(adam, a); }, ErrorKind::invalid_argument, part);
  };
  EXPECT_NO_THROW(update(adam, good()));
  bad([](UpdateArgs& a) { a.param = Tensor::zeros({6}, DType::bf16); }, "bf16 params need an fp32 master");
  bad([](UpdateArgs& a) { a.master = Tensor::zeros({6}, DType::bf16); }, "master must be f32");
  bad([](UpdateArgs& a) { a.grad = Tensor::zeros({5}); }, "grad has 5 elements, param has 6");
  bad([](UpdateArgs& a) { a.grad = Tensor::zeros({6}, DType::i32); }, "must be f32, bf16 or f16");
  bad([](UpdateArgs& a) { a.param = Tensor::zeros({3, 2}).transpose(0, 1); }, "param must be contiguous");
  bad([](UpdateArgs& a) { a.states.pop_back(); }, "AdamW takes 2 state tensors, got 1");
  bad([](UpdateArgs& a) { a.states[1] = Tensor::zeros({6}, DType::bf16); }, "states must be f32");
  bad([](UpdateArgs& a) { a.step = 0; }, "step is 1-based");
  bad([](UpdateArgs& a) { a.lr = NAN; }, "lr must be >= 0");
  expect_error([&] { update(config::OptimizerConfig{"Lamb"}, good()); }, ErrorKind::config, "unknown optimizer type");
}

}  // namespace
}  // namespace zt::optim
