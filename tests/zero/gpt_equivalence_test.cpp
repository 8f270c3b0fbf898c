// Run under mpirun -np N: a small GPT with a tied output projection (wte) follows one process's
// trajectory at every ZeRO stage, also with activation checkpointing, and with sparse
// embedding gradients (wpe as rows, the tied wte in two parts: Note [tied rows]).
#include "zero_harness.h"
#include "zt/autograd/autograd.h"
#include "zt/core/parallel.h"
#include "zt/nn/transformer.h"
#include "../common/tiny_gpt.h"

using namespace zt;
using namespace zt::testing;

namespace {

constexpr int64_t kVocab = 37, kT = 12;  // positions 12..15 of wpe are never touched

nn::TransformerConfig gpt_config(bool ckpt) {
  nn::TransformerConfig c = testing_util::tiny_gpt(kVocab);
  c.activation_checkpointing = ckpt;
  return c;
}

struct GptSpec {
  int stage = 0;
  bool ckpt = false, sparse = false;
  int64_t prefetch = 200;  // elements gathered ahead at stage 3 (200: none of this model's units)
  int64_t micro = 2, gas = 2, steps = 8;
  int64_t reuse = 1'000'000'000, max_live = 1'000'000'000;  // stage3_max_reuse_distance, _max_live_parameters
  bool eval_between = false;                                // an evaluation forward (no gradients) after every step
};

// Sequences of kT + 1 tokens: x = the first kT, y = the last kT.
Tensor make_tokens(int64_t rows) {
  Generator g(17);
  std::vector<int32_t> v(static_cast<size_t>(rows * (kT + 1)));
  for (auto& t : v) t = int32_t(g.below(kVocab));
  return Tensor::from_ints(v, {rows, kT + 1});
}

constexpr int64_t kWarmSteps = 3;  // steps after which every buffer a step needs is cached

struct GptResult {
  RunResult run;
  std::vector<std::string> names;
  size_t system_allocs_after_warmup = 0, system_allocs_at_end = 0;  // the allocator's cache misses
};

GptResult train_gpt(const GptSpec& s, const comm::GroupPtr& group, const Tensor& tokens) {
  auto model = nn::make_gpt(gpt_config(s.ckpt));
  RunSpec rs;
  rs.stage = s.stage;
  rs.gas = s.gas;
  rs.bucket = 500;
  zero::EngineOptions o = options(rs);
  o.sparse_gradients = s.sparse;
  o.zero.stage3_prefetch_bucket_size = s.prefetch;
  o.zero.stage3_max_reuse_distance = s.reuse;
  o.zero.stage3_max_live_parameters = s.max_live;
  zero::Engine e(*model, group, o);
  const int64_t N = group->size(), r = group->rank(), global = s.micro * s.gas * N;
  RunResult out;
  size_t warm_allocs = 0;
  for (int64_t step = 0; step < s.steps; ++step) {
    if (step == kWarmSteps) warm_allocs = allocator_for(test_device()).stats().system_allocs;
    double loss_sum = 0;
    for (int64_t m = 0; m < s.gas; ++m) {
      const int64_t b = step * global + (m * N + r) * s.micro;
      Tensor rows = tokens.slice(0, b, b + s.micro);
      Tensor x = rows.slice(1, 0, kT).contiguous(), y = rows.slice(1, 1, kT + 1).contiguous().reshape({s.micro * kT});
      Tensor logits = e.forward(std::vector<Tensor>{x});
      Tensor loss = ag::cross_entropy(ag::reshape(logits, {s.micro * kT, kVocab}), y.to(logits.device()));
      loss_sum += loss.item() / double(s.gas);
      e.backward(loss);
    }
    out.stats.push_back(e.step(1e-2));
    out.losses.push_back(group->all_reduce_scalar(loss_sum) / double(N));
    if (s.eval_between) {
      autograd::NoGradGuard no_grad;
      (void)e.forward(std::vector<Tensor>{tokens.slice(0, 0, s.micro).slice(1, 0, kT).contiguous()});
    }
  }
  const size_t end_allocs = allocator_for(test_device()).stats().system_allocs;
  if (s.sparse) {  // wpe travels as rows; wte, tied to lm_head, in two parts at stages 0-2
    int sparse = 0, tied = 0;
    for (auto& b : e.plan().buffers) sparse += b.sparse, tied += b.tied_rows;
    EXPECT_EQ(sparse, 1);
    EXPECT_EQ(tied, s.stage < 3 ? 1 : 0);
    EXPECT_GT(e.sparse_comm_bytes().moved, 0);
    // Note [tied rows]: lm_head's part left before backward ended, once per reducing pass.
    const int64_t passes = s.steps * (s.stage == 2 ? s.gas : 1);
    EXPECT_EQ(e.sparse_comm_bytes().tied_early, s.stage < 3 ? passes : 0);
  }
  std::vector<std::string> names;
  e.for_each_full_param([&](const std::string& n, const Tensor& p) {
    out.params.push_back(p.to_vector());
    names.push_back(n);
  });
  return {out, names, warm_allocs, end_allocs};
}

void check(const GptSpec& s) {
  const int64_t N = g_world->size();
  const Tensor tokens = make_tokens(s.steps * s.micro * s.gas * N);
  GptSpec ref = s;
  ref.micro = s.micro * N;
  ref.ckpt = false;
  ref.sparse = false;
  GptResult want = train_gpt(ref, comm::make_group("local"), tokens);
  GptResult got = train_gpt(s, g_world, tokens);
  // Note: the key part of c_attn.bias has an exactly zero gradient (softmax ignores a shift
  // shared by all keys), so its float32 gradient is rounding noise that Adam turns into steps of
  // up to lr: those entries only have to stay within lr per step of each other.
  const int64_t C = gpt_config(false).n_embd;
  const double lr = 1e-2;
  for (size_t p = 0; p < got.names.size(); ++p) {
    if (got.names[p].find("attn.c_attn.bias") == std::string::npos) continue;
    for (int64_t i = C; i < 2 * C; ++i) {
      EXPECT_LE(std::abs(got.run.params[p][size_t(i)] - want.run.params[p][size_t(i)]), 2 * lr * double(s.steps));
      got.run.params[p][size_t(i)] = want.run.params[p][size_t(i)];
    }
  }
  expect_same_trajectory(got.run, want.run, trajectory_tolerance(DType::f32));
}

class GptStage : public ::testing::TestWithParam<int> {};

TEST_P(GptStage, TiedWeightsMatchOneProcess) { check({GetParam(), false, false}); }
TEST_P(GptStage, ActivationCheckpointingMatchesOneProcess) { check({GetParam(), true, false}); }
TEST_P(GptStage, SparseEmbeddingGradientsMatchOneProcess) {
  if (!test_device().is_cpu()) GTEST_SKIP() << "sparse gradients run on the host only (a config error on a device)";
  check({GetParam(), false, true});
}
// Prefetching every unit ahead, with recomputes inside backward (which must not prefetch).
TEST_P(GptStage, CheckpointingWithPrefetchMatchesOneProcess) { check({GetParam(), true, false, 1 << 20}); }

// Note [overlap]: every step reports how long its reductions (and stage 3's gathers) ran and
// how long the engine waited for them; shm times transfers, mpi cannot (busy 0, hidden unknown).
TEST_P(GptStage, ReportsCommunicationOverlapPerStep) {
  GptSpec s{GetParam(), false, false};
  s.steps = 3;
  const GptResult r = train_gpt(s, g_world, make_tokens(s.steps * s.micro * s.gas * g_world->size()));
  const bool timed = std::string(g_world->backend()) == "shm";
  ASSERT_EQ(r.run.stats.size(), size_t(s.steps));
  for (const zero::StepStats& st : r.run.stats) {
    EXPECT_EQ(st.reduce.busy_s > 0, timed);
    EXPECT_EQ(st.gather.busy_s > 0, timed && s.stage == 3);
    EXPECT_GE(st.reduce.blocked_s, 0.0);
    EXPECT_EQ(st.reduce.hidden().has_value(), timed);
    if (st.reduce.hidden()) {
      EXPECT_GE(*st.reduce.hidden(), 0.0);
      EXPECT_LE(*st.reduce.hidden(), 1.0);
    }
  }
}

// docs/design.md: once warm, a step takes no new memory from the system (the caching allocator serves
// every activation, gradient bucket, gather and wire buffer again), with recompute too.
TEST_P(GptStage, SteadyStateStepTakesNoNewMemoryFromTheSystem) {
  for (bool ckpt : {false, true}) {
    GptSpec s{GetParam(), ckpt, false};
    s.steps = kWarmSteps + 3;
    const GptResult r = train_gpt(s, g_world, make_tokens(s.steps * s.micro * s.gas * g_world->size()));
    EXPECT_GT(r.system_allocs_after_warmup, 0u);  // the counter counts
    EXPECT_EQ(r.system_allocs_at_end, r.system_allocs_after_warmup) << (ckpt ? "with" : "without") << " checkpointing";
  }
}

// Note [reuse distance]: from the second step on, units used again soon (the tied wte, each
// micro-batch's first unit, a recomputed unit) stay gathered: fewer all-gathers, the same
// trajectory bit for bit. Distance 0, or a live limit of one unit, gathers for every use.
TEST_P(GptStage, ReuseDistanceKeepsReusedUnitsGatheredOnTheSameTrajectory) {
  if (GetParam() != 3) GTEST_SKIP() << "stage 3 only";
  for (bool ckpt : {false, true}) {
    GptSpec s{3, ckpt, false};
    s.steps = 3;
    const Tensor tokens = make_tokens(s.steps * s.micro * s.gas * g_world->size());
    const GptResult kept = train_gpt(s, g_world, tokens);
    s.reuse = 0;
    const GptResult every = train_gpt(s, g_world, tokens);
    s.reuse = 1'000'000'000;
    s.max_live = 1;  // any unit is more than this
    const GptResult capped = train_gpt(s, g_world, tokens);
    s.max_live = 1'000'000'000;
    s.eval_between = true;  // evaluation passes leave the trace alone
    const GptResult evaluated = train_gpt(s, g_world, tokens);
    EXPECT_EQ(evaluated.run.losses, kept.run.losses);
    EXPECT_EQ(kept.run.losses, every.run.losses);
    EXPECT_EQ(kept.run.params, every.run.params);
    for (int step = 0; step < 3; ++step) {
      const int64_t k = kept.run.stats[size_t(step)].gathers, e = every.run.stats[size_t(step)].gathers;
      EXPECT_EQ(capped.run.stats[size_t(step)].gathers, e) << "step " << step;
      // The evaluation forward's own gathers count in the step after it; were reuse off in
      // that step (the trace lost), it alone would make as many as `e`.
      if (step > 0) {
        EXPECT_LT(evaluated.run.stats[size_t(step)].gathers, e) << "step " << step << " after an evaluation";
      }
      if (step == 0) {
        EXPECT_EQ(k, e);  // the first step makes the trace
      } else {
        EXPECT_LT(k, e) << "step " << step << (ckpt ? " with checkpointing" : "");
      }
      std::printf("[reuse] %s step %d: %lld all-gathers kept, %lld without reuse\n", ckpt ? "ckpt" : "plain", step,
                  (long long)k, (long long)e);
    }
  }
}

TEST(CommOverlap, HiddenIsTheShareOfBusyTimeNobodyWaitedFor) {
  zero::CommOverlap o;
  EXPECT_FALSE(o.hidden().has_value());  // nothing measured
  o.busy_s = 2.0;
  o.blocked_s = 0.5;
  EXPECT_DOUBLE_EQ(*o.hidden(), 0.75);
  o.blocked_s = 3.0;  // waited longer than the transfer ran (the wait began before it started)
  EXPECT_DOUBLE_EQ(*o.hidden(), 0.0);
  zero::CommOverlap sum = o;
  sum += o;
  EXPECT_DOUBLE_EQ(sum.busy_s, 4.0);
  EXPECT_DOUBLE_EQ(sum.blocked_s, 6.0);
}

INSTANTIATE_TEST_SUITE_P(Zero, GptStage, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });

TEST(GptLayout, TiedWeightIsOneEntryInTheFlatLayout) {
  auto model = nn::make_gpt(gpt_config(false));
  RunSpec rs;
  rs.stage = 3;
  zero::Engine e(*model, g_world, options(rs));
  const auto& names = e.param_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "wte.weight"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "lm_head.weight"), 0);
  EXPECT_EQ(e.num_params(), model->num_parameters());
}

// Note [counter init]: each rank fills only the shard it holds, with all its threads, and the
// weights are one process's eager ones at any world size, stage and thread count.
TEST(CounterInit, InitialWeightsAreTheSameAtEveryWorldSizeStageAndThreadCount) {
  nn::TransformerConfig c = gpt_config(false);
  c.vocab_size = 1001;  // wte: 3 chunks of run_init, so two threads split it
  c.n_embd = 96;
  c.n_head = 3;
  const int saved = num_threads();
  set_num_threads(1);
  std::vector<std::vector<float>> want;
  for (auto& [n, p] : nn::make_gpt(c)->named_parameters()) want.push_back(p.to_vector());
  for (int threads : {1, 2})
    for (int stage : {0, 3}) {
      set_num_threads(threads);
      std::shared_ptr<nn::Module> lazy;
      {
        nn::DeferredInit defer;
        lazy = nn::make_gpt(c);
      }
      RunSpec rs;
      rs.stage = stage;
      zero::Engine e(*lazy, g_world, options(rs));
      size_t i = 0;
      e.for_each_full_param([&](const std::string& n, const Tensor& p) {
        ASSERT_LT(i, want.size());
        EXPECT_EQ(p.to(Device::cpu()).to_vector(), want[i++]) << n << " stage " << stage << " threads " << threads;
      });
      EXPECT_EQ(i, want.size());
    }
  set_num_threads(saved);
}

}  // namespace
