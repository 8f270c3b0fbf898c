// FlatOptimizer against PyTorch 1.13 golden trajectories (tests/golden/optim.json, written by
// tests/optim/gen_optim_golden.py), on both sides of the parallel grain.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

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

OptimizerSpec spec_of(const json& c) {
  OptimizerSpec s;
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

// Runs every golden case on a buffer of `reps` copies of the 7-element vector, so a large
// `reps` exercises the parallel path; every copy must follow torch's trajectory.
void check_golden(int64_t reps) {
  set_num_threads(2);  // make the parallel branch really split across threads
  ASSERT_GT(golden()["cases"].size(), 0u);
  for (const auto& c : golden()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto init = c["init"].get<std::vector<float>>();
    const int64_t k = int64_t(init.size()), n = k * reps;
    std::vector<float> p(static_cast<size_t>(n)), g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) p[size_t(i)] = init[size_t(i % k)];
    auto opt = FlatOptimizer::create(spec_of(c), n);
    const auto& lrs = c["lrs"];
    for (size_t s = 0; s < lrs.size(); ++s) {
      const auto gs = c["grads"][s].get<std::vector<float>>();
      for (int64_t i = 0; i < n; ++i) g[size_t(i)] = gs[size_t(i % k)];
      opt->step(p.data(), g.data(), lrs[s].get<float>());
      const auto want = c["params"][s].get<std::vector<float>>();
      for (int64_t i = 0; i < n; ++i) {
        const float w = want[size_t(i % k)];
        ASSERT_NEAR(p[size_t(i)], w, 1e-6f * std::max(1.f, std::fabs(w))) << "step " << s << " elem " << i;
      }
    }
    EXPECT_EQ(opt->steps(), int64_t(lrs.size()));
    for (auto& [name, t] : opt->state()) {
      ASSERT_TRUE(c["final_state"].contains(name)) << name;
      const auto want = c["final_state"][name].get<std::vector<float>>();
      const float* v = t.data<float>();
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(v[i], want[size_t(i % k)], 1e-6f * std::max(1.f, std::fabs(want[size_t(i % k)])))
            << name << " elem " << i;
    }
    EXPECT_EQ(opt->state().size(), c["final_state"].size());
  }
}

TEST(Optimizer, GoldenSmallSerial) {
  static_assert(7 * 3 < kOptimGrain);
  check_golden(3);
}

TEST(Optimizer, GoldenLargeParallel) { check_golden(kOptimGrain / 7 * 3 + 5); }

// Element-wise updates: a buffer above the grain must give bit-identical results to the same
// elements updated below it, for every optimizer variant.
TEST(Optimizer, ParallelEqualsSerialBitwise) {
  set_num_threads(2);
  const int64_t n = 2 * kOptimGrain + 123, half = n / 2;
  ASSERT_LT(n - half, kOptimGrain * 2);
  for (const char* type : {"Adam", "AdamW", "SGD"}) {
    for (float wd : {0.f, 0.05f}) {
      OptimizerSpec s;
      s.type = type;
      s.weight_decay = wd;
      s.momentum = std::string(type) == "SGD" ? 0.8f : 0.f;
      s.nesterov = wd > 0 && std::string(type) == "SGD";
      std::vector<float> p(static_cast<size_t>(n)), g(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) p[size_t(i)] = std::sin(0.01f * float(i));
      std::vector<float> q = p;
      auto big = FlatOptimizer::create(s, n);
      // Same elements in pieces smaller than the grain (serial path).
      std::vector<std::unique_ptr<FlatOptimizer>> small;
      std::vector<int64_t> starts;
      for (int64_t b = 0; b < n; b += kOptimGrain / 2) {
        starts.push_back(b);
        small.push_back(FlatOptimizer::create(s, std::min(kOptimGrain / 2, n - b)));
      }
      for (int step = 0; step < 3; ++step) {
        for (int64_t i = 0; i < n; ++i) g[size_t(i)] = std::cos(0.003f * float(i * (step + 1)));
        big->step(p.data(), g.data(), 0.01f);
        for (size_t j = 0; j < small.size(); ++j) small[j]->step(q.data() + starts[j], g.data() + starts[j], 0.01f);
      }
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p[size_t(i)], q[size_t(i)]) << type << " wd " << wd << " elem " << i;
    }
  }
}

TEST(Optimizer, StateIsTaggedOptimAndSized) {
  const int64_t n = 1000;
  auto optim_bytes = [] { return Allocator::global().stats().of(MemTag::optim); };
  struct Case { const char* type; float momentum; size_t bytes; size_t tensors; };
  for (Case c : {Case{"Adam", 0.f, size_t(8 * n), 2}, Case{"adamw", 0.f, size_t(8 * n), 2}, Case{"SGD", 0.9f, size_t(4 * n), 1},
                 Case{"sgd", 0.f, 0, 0}}) {
    SCOPED_TRACE(c.type);
    const size_t before = optim_bytes();
    OptimizerSpec s;
    s.type = c.type;
    s.momentum = c.momentum;
    {
      auto opt = FlatOptimizer::create(s, n);
      EXPECT_EQ(opt->state_bytes(), c.bytes);
      EXPECT_EQ(optim_bytes() - before, c.bytes);
      EXPECT_EQ(opt->state().size(), c.tensors);
      EXPECT_EQ(opt->size(), n);
      for (auto& [name, t] : opt->state()) {
        EXPECT_EQ(t.storage()->tag(), MemTag::optim) << name;
        EXPECT_EQ(t.shape(), Shape{n});
      }
    }
    EXPECT_EQ(optim_bytes(), before);
  }
}

TEST(Optimizer, AdamStateNamesForCheckpoints) {
  auto opt = FlatOptimizer::create(OptimizerSpec{}, 4);
  auto st = opt->state();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].first, "exp_avg");
  EXPECT_EQ(st[1].first, "exp_avg_sq");
  EXPECT_EQ(opt->spec().type, "AdamW");
}

// Restoring steps and state from a checkpoint continues the same trajectory.
TEST(Optimizer, ResumeFromStateMatchesUninterrupted) {
  for (const char* type : {"AdamW", "SGD"}) {
    OptimizerSpec s;
    s.type = type;
    s.momentum = 0.9f;
    s.weight_decay = 0.01f;
    const int64_t n = 9;
    std::vector<float> p(n, 0.5f), g(n), q;
    auto a = FlatOptimizer::create(s, n);
    auto grad = [&](int step) { for (int64_t i = 0; i < n; ++i) g[size_t(i)] = float(i - 4) * 0.1f + float(step); };
    for (int step = 0; step < 2; ++step) grad(step), a->step(p.data(), g.data(), 0.1f);
    q = p;
    auto b = FlatOptimizer::create(s, n);
    b->set_steps(a->steps());
    auto sa = a->state(), sb = b->state();
    for (size_t k = 0; k < sa.size(); ++k) sb[k].second.copy_(sa[k].second);
    for (int step = 2; step < 4; ++step) {
      grad(step);
      a->step(p.data(), g.data(), 0.1f);
      b->step(q.data(), g.data(), 0.1f);
    }
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(p[size_t(i)], q[size_t(i)]) << type;
  }
}

TEST(Optimizer, ZeroSizeShardIsANoOp) {
  auto opt = FlatOptimizer::create(OptimizerSpec{}, 0);
  opt->step(nullptr, nullptr, 0.1f);
  EXPECT_EQ(opt->steps(), 1);
  EXPECT_EQ(opt->state_bytes(), 0u);
}

void expect_error(const OptimizerSpec& s, const std::string& part) {
  try {
    FlatOptimizer::create(s, 4);
    ADD_FAILURE() << "no error, expected: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Optimizer, RejectsBadSpecs) {
  OptimizerSpec s;
  s.type = "Lamb";
  expect_error(s, "unknown optimizer type 'Lamb' (allowed: Adam, AdamW, SGD)");
  s = {};
  s.lr = -1.f;
  expect_error(s, "lr must be >= 0");
  s = {};
  s.beta2 = 1.f;
  expect_error(s, "beta2 must be in [0, 1)");
  s = {};
  s.type = "SGD";
  s.nesterov = true;
  expect_error(s, "nesterov requires momentum > 0");
  s = {};
  s.weight_decay = -0.1f;
  expect_error(s, "weight_decay must be >= 0");
  EXPECT_THROW(FlatOptimizer::create(OptimizerSpec{}, -1), Error);
}

}  // namespace
}  // namespace zt::optim

namespace zt::optim {
namespace {
TEST(StateBytesPerElem, MatchesWhatTheOptimizerAllocates) {
  for (auto [type, momentum] : {std::pair{"Adam", 0.f}, {"adamw", 0.f}, {"SGD", 0.9f}, {"sgd", 0.f}}) {
    OptimizerSpec s;
    s.type = type;
    s.momentum = momentum;
    auto opt = FlatOptimizer::create(s, 100);
    EXPECT_EQ(int64_t(opt->state_bytes()), 100 * state_bytes_per_elem(s)) << type;
  }
}
}  // namespace
}  // namespace zt::optim
