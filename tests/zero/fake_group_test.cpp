// The engine's N-rank arithmetic in one process, over comm's fake group (every peer contributes
// what this rank contributes): exact model-state bytes for every rank, stage, dtype and N, and
// the peak per rank, which must fall with the stage as ZeRO promises.
#include <unistd.h>

#include <filesystem>

#include "zero_harness.h"

using namespace zt;
using namespace zt::testing;

namespace zt::testing {
comm::GroupPtr g_world;  // unused here; the harness declares it for the mpirun tests
}

namespace {

TEST(FakeGroup, ModelStateBytesMatchThePlanForEveryRank) {
  for (int N : {2, 3, 4})
    for (int r = 0; r < N; ++r)
      for (DType dt : {DType::f32, DType::bf16})
        for (int stage = 0; stage <= 3; ++stage) {
          RunSpec s;
          s.stage = stage;
          s.dtype = dt;
          s.gas = 1;
          auto group = comm::make_fake_group(r, N);
          const Data d = make_data(2 * s.micro * N);
          Allocator::global().release_cached();
          const MemStats before = Allocator::global().stats();
          auto model = make_model();
          zero::Engine engine(*model, group, options(s));
          for (int64_t step = 0; step < 2; ++step) {
            train_step(engine, s, d, step);
            engine.step(1e-2);
          }
          const MemStats m = Allocator::global().stats();
          const zero::MemoryEstimate e = engine.expected_memory();
          const std::string where = "N=" + std::to_string(N) + " rank " + std::to_string(r) + " stage " +
                                    std::to_string(stage) + " " + dtype_name(dt);
          EXPECT_EQ(int64_t(m.of(MemTag::param) - before.of(MemTag::param)), e.param) << where;
          EXPECT_EQ(int64_t(m.of(MemTag::grad) - before.of(MemTag::grad)), e.grad) << where;
          EXPECT_EQ(int64_t(m.of(MemTag::master) - before.of(MemTag::master)), e.master) << where;
          EXPECT_EQ(int64_t(m.of(MemTag::optim) - before.of(MemTag::optim)), e.optim) << where;
        }
}


struct Peak {
  int64_t total, states, activation, allowance;
};

// Peak bytes of one rank from engine construction through three steps.
Peak peak_of(int stage, int N, DType dt) {
  const int64_t unit = kWideUnit;
  zero::EngineOptions o;
  o.zero.stage = stage;
  o.dtype = dt;
  o.zero.reduce_bucket_size = unit;
  o.zero.stage3_prefetch_bucket_size = unit;
  o.zero.stage3_max_live_parameters = 2 * unit;
  o.zero.stage3_param_persistence_threshold = 0;
  Allocator::global().release_cached();
  Allocator::global().reset_peaks();
  const size_t base = Allocator::global().stats().total_current;
  const auto [x, y] = wide_batch(3);
  Peak p{};
  {
    auto model = make_wide_model();
    zero::Engine engine(*model, comm::make_fake_group(0, N), o);
    for (int step = 0; step < 3; ++step) {
      engine.backward(ag::cross_entropy(engine.forward(x), y));
      engine.step(1e-3);
    }
    const MemStats m = Allocator::global().stats();
    p.total = int64_t(m.total_peak - base);
    p.states = engine.expected_memory().total();
    p.activation = int64_t(m.peak_of(MemTag::activation));
    // In flight by design: one bucket's full gradient with its wire and receive buffers (the next
    // one's gradient waits for its reduction, Note [step schedule]), and at stage 3 the units
    // allowed to be gathered.
    const int64_t b = int64_t(dtype_size(dt));
    p.allowance = (unit * 2 + unit) * b + (stage == 3 ? o.zero.stage3_max_live_parameters * b : 0);
  }
  return p;
}

TEST(FakeGroup, PeakMemoryFallsWithTheStageAndStaysWithinStatesPlusInFlight) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int N : {2, 4}) {
      int64_t prev = 0;
      for (int stage = 0; stage <= 3; ++stage) {
        const Peak p = peak_of(stage, N, dt);
        const std::string where = "stage " + std::to_string(stage) + " N=" + std::to_string(N) + " " + dtype_name(dt);
        EXPECT_LE(double(p.total), 1.1 * double(p.states + p.allowance + p.activation)) << where;
        if (stage > 0) {
          EXPECT_LT(p.total, prev) << where;
        }
        prev = p.total;
        std::printf("[peak] %s: peak %lld bytes, states %lld, allowance %lld, activations %lld\n", where.c_str(),
                    (long long)p.total, (long long)p.states, (long long)p.allowance, (long long)p.activation);
      }
    }
}

// Issue 31 (FSDP's memory test), per phase of a step: after construction and after the step one
// rank holds exactly its model states (Plan::memory, by placement: offloaded states are their tile
// buffers); at the forward peak at most those plus the units stage 3 may hold gathered plus the
// activations; at the backward peak that plus the buckets in flight. Stages 1-3, N = 2 and 4, in
// memory and with the optimizer states in swap files.
TEST(FakeGroup, EachPhaseOfAStepStaysWithinItsFormula) {
  const int64_t unit = kWideUnit;
  const auto [x, y] = wide_batch(5);
  const std::string swap = (std::filesystem::temp_directory_path() / ("zt_phase_" + std::to_string(::getpid()))).string();
  for (bool offload : {false, true})
    for (int stage = 1; stage <= 3; ++stage)
      for (int N : {2, 4}) {
        zero::EngineOptions o;
        o.zero.stage = stage;
        o.dtype = DType::bf16;
        o.zero.reduce_bucket_size = unit;
        o.zero.stage3_prefetch_bucket_size = unit;
        o.zero.stage3_max_live_parameters = 2 * unit;
        o.zero.stage3_param_persistence_threshold = 0;
        if (offload) {
          o.zero.offload_optimizer.device = "nvme";
          o.zero.offload_optimizer.nvme_path = swap;
          o.zero.sub_group_size = 16384;
        }
        const std::string where = "stage " + std::to_string(stage) + " N=" + std::to_string(N) +
                                  (offload ? " offloaded" : " in memory");
        Allocator& a = Allocator::global();
        a.release_cached();
        const int64_t base = int64_t(a.stats().total_current);
        auto in_use = [&] { return int64_t(a.stats().total_current) - base; };
        auto peak = [&] { return int64_t(a.stats().total_peak) - base; };
        auto model = make_wide_model();
        zero::Engine engine(*model, comm::make_fake_group(0, N), o);
        const int64_t states = engine.expected_memory().total();
        const int64_t b = 2;  // bf16
        const int64_t gathered = stage == 3 ? o.zero.stage3_max_live_parameters * b : 0;
        // One bucket at a time (Note [step schedule]): the next one's gradient waits for the last reduction.
        const int64_t buckets = unit * 4 + unit * b + unit / N * b;
        EXPECT_EQ(in_use(), states) << where << ": after construction";
        for (int step = 0; step < 2; ++step) {
          int64_t forward = 0, backward = 0;
          {
            a.reset_peaks();
            Tensor loss = ag::cross_entropy(engine.forward(x), y);
            forward = peak();
            EXPECT_LE(forward, states + gathered + int64_t(a.stats().peak_of(MemTag::activation)))
                << where << ": forward peak";
            a.reset_peaks();
            engine.backward(loss);
            backward = peak();
            EXPECT_LE(backward, states + gathered + buckets + int64_t(a.stats().peak_of(MemTag::activation)))
                << where << ": backward peak";
          }
          engine.step(1e-3);
          EXPECT_EQ(in_use(), states) << where << ": after step " << step + 1;
          if (step == 1)
            std::printf("[phase] %s: states %lld, forward %lld, backward %lld (gathered <= %lld, buckets <= %lld)\n",
                        where.c_str(), (long long)states, (long long)forward, (long long)backward,
                        (long long)gathered, (long long)buckets);
        }
      }
  std::filesystem::remove_all(swap);
}

}  // namespace

namespace {

// Note [deferred init]: a model built with shapes only gets the same initial values as one
// built eagerly, at every stage, and at stage 3 construction holds one unit beyond the shards.
TEST(DeferredInit, SameInitialValuesAsEagerAtEveryStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    auto eager = make_wide_model();
    std::vector<std::vector<float>> want;
    for (auto& [n, p] : eager->named_parameters()) want.push_back(p.to_vector());
    std::shared_ptr<nn::Module> lazy;
    {
      nn::DeferredInit defer;
      lazy = make_wide_model();
    }
    for (auto& [n, p] : lazy->named_parameters()) EXPECT_FALSE(p.has_storage()) << n;
    zero::EngineOptions o;
    o.zero.stage = stage;
    o.zero.reduce_bucket_size = 256 * 256;  // buckets in reverse model order
    o.zero.stage3_param_persistence_threshold = 0;
    zero::Engine engine(*lazy, comm::make_fake_group(0, 1), o);
    size_t i = 0;
    engine.for_each_full_param([&](const std::string& n, const Tensor& p) {
      ASSERT_LT(i, want.size());
      EXPECT_EQ(p.to_vector(), want[i++]) << "stage " << stage << " " << n;
    });
    EXPECT_EQ(i, want.size());
  }
}

// Construction materialises one unit at a time beside the shards, which stays below the model
// states at rest: the peak through construction is exactly the states. (Built eagerly, the
// whole fp32 model comes first: at N = 4 that peak is 15% above the states.)
TEST(DeferredInit, Stage3ConstructionNeverExceedsTheModelStates) {
  for (int N : {2, 4}) {
    Allocator::global().release_cached();
    Allocator::global().reset_peaks();
    const size_t base = Allocator::global().stats().total_current;
    std::shared_ptr<nn::Module> model;
    {
      nn::DeferredInit defer;
      model = make_wide_model();
    }
    zero::EngineOptions o;
    o.zero.stage = 3;
    o.zero.stage3_param_persistence_threshold = 0;
    zero::Engine engine(*model, comm::make_fake_group(0, N), o);
    const int64_t peak = int64_t(Allocator::global().stats().total_peak - base);
    const int64_t states = engine.expected_memory().total();
    EXPECT_LE(peak, states) << "N=" << N;
  }
}

}  // namespace

namespace {

// The harness's MLP with a host read of its first weight planted in forward: harmless where the
// weights are host memory, a fault where they are device memory.
class PlantedHostRead : public nn::Module {
 public:
  PlantedHostRead() : inner_(make_model()) { register_module("inner", inner_); }
  const char* type_name() const override { return "PlantedHostRead"; }

 protected:
  Tensor forward(const Tensor& x) override {
    volatile float first = inner_->named_parameters()[0].second.data<float>()[0];
    (void)first;
    return (*inner_)(x);
  }

 private:
  std::shared_ptr<nn::Module> inner_;
};

// One training step of PlantedHostRead at stage 2 on `device`, one process.
void train_planted(Device device) {
  RunSpec s;
  s.stage = 2;
  s.gas = 1;
  const Data d = make_data(s.micro);
  PlantedHostRead model;
  zero::EngineOptions o = options(s);
  o.device = device;
  zero::Engine engine(model, comm::make_group("local"), o);
  train_step(engine, s, d, 0);
  engine.step(1e-2);
}

}  // namespace

// The mutation check's other half (Note [sim device]): a host read of a device buffer planted in
// the engine's forward passes on cpu and faults on sim (the dropped synchronisation is
// tests/e2e/sim_device_test.cpp's SimMutation).
TEST(SimMutationDeathTest, AHostReadPlantedInTheEngineFaultsOnSim) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_NO_THROW(train_planted(Device::cpu()));
  EXPECT_DEATH(train_planted(Device::sim()), "");  // SIGSEGV (under ASan, its report)
}
