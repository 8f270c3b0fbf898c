// Note [step schedule] on a running engine (one process, comm's fake group): the bytes its
// buckets hold at the peak of a backward are the predictor's bucket term exactly, and a buffer
// kind added in one place moves both by the same bytes.
#include "zero_harness.h"
#include "zt/zero/budget.h"
#include "zt/nn/transformer.h"
#include "../common/tiny_gpt.h"
#include "zt/zero/schedule.h"

using namespace zt;

namespace {

struct Peaks {
  int64_t runtime = 0, predicted = 0;
};

// One backward of the second step at N = 2 on eight equal layers, reduce buckets of about one:
// the peak of the bytes tagged comm (the buckets' full gradients at stages 2-3, their wire
// copies, receive buffers and any kind a flight makes) against the predicted bucket term.
Peaks bucket_peaks(int stage, DType dt, std::optional<DType> accum, int64_t inflight_buckets) {
  const int64_t unit = zt::testing::kWideUnit;
  zero::EngineOptions o;
  o.zero.stage = stage;
  o.dtype = dt;
  o.grad_accum_dtype = accum;
  o.zero.reduce_bucket_size = unit;
  o.max_inflight_reduce_elems = inflight_buckets * unit;
  const auto [x, y] = zt::testing::wide_batch(3);
  auto model = zt::testing::make_wide_model();
  zero::Engine engine(*model, comm::make_fake_group(0, 2), o);
  Peaks p;
  for (int step = 0; step < 2; ++step) {
    Tensor loss = ag::cross_entropy(engine.forward(x), y);
    Allocator::global().reset_peaks();
    const int64_t before = int64_t(Allocator::global().stats().of(MemTag::comm));
    engine.backward(loss);
    p.runtime = int64_t(Allocator::global().stats().peak_of(MemTag::comm)) - before;
    engine.step(1e-3);
  }
  zero::PeakInput in;
  static_cast<zero::StepLimits&>(in) = zero::step_limits(o);
  p.predicted = zero::predict_peak(engine.plan(), in).grad_buckets;
  return p;
}

TEST(StepSchedule, TheBucketsPeakIsThePredictionsAndAnAddedKindMovesBoth) {
  struct Case {
    int stage;
    DType dt;
    std::optional<DType> accum;  // f32 under bf16 at stage 1: the wire copy (bf16 from f32)
  };
  for (const Case& c : {Case{1, DType::f32, {}}, Case{2, DType::f32, {}}, Case{1, DType::bf16, DType::f32},
                        Case{2, DType::bf16, {}}, Case{3, DType::f32, {}}, Case{3, DType::bf16, {}}})
    for (int64_t inflight : {1, 3}) {
      const std::string where = "stage " + std::to_string(c.stage) + " " + dtype_name(c.dt) + ", " +
                                std::to_string(inflight) + " bucket(s) in flight";
      const Peaks without = bucket_peaks(c.stage, c.dt, c.accum, inflight);
      EXPECT_EQ(without.runtime, without.predicted) << where;
      Peaks with;
      {
        auto kind = zero::add_buffer_kind({"test scratch", zero::Span::flight,
                                           [](const zero::Plan& p, size_t b) { return p.buffers[b].padded * 4; },
                                           true, nullptr, MemTag::comm});
        with = bucket_peaks(c.stage, c.dt, c.accum, inflight);
      }
      EXPECT_EQ(with.runtime, with.predicted) << where;
      EXPECT_GT(with.runtime, without.runtime) << where;
      EXPECT_EQ(with.runtime - without.runtime, with.predicted - without.predicted) << where;
    }
}

// Stage 3 (f32, no persistent units): the units gathered at once, as ParamStore's prefetch rule
// allows (one unit ahead within two units live, no reuse; then no prefetch), against the
// predictor's gathered term, and a unit kind made at each gather (tagged master, which an f32 run
// does not otherwise use) moving both.
TEST(StepSchedule, AUnitKindMadeAtEachGatherMovesTheRuntimeAndThePrediction) {
  const int64_t unit = zt::testing::kWideUnit;
  for (int64_t prefetch : {unit, int64_t(0)}) {
    zero::EngineOptions o;
    o.zero.stage = 3;
    o.zero.stage3_prefetch_bucket_size = prefetch;
    o.zero.stage3_max_live_parameters = 2 * unit;
    o.zero.stage3_max_reuse_distance = 0;
    o.zero.stage3_param_persistence_threshold = 0;
    const auto [x, y] = zt::testing::wide_batch(3);
    auto run = [&](int64_t& made_peak, int64_t& predicted) {
      auto model = zt::testing::make_wide_model();
      zero::Engine engine(*model, comm::make_fake_group(0, 2), o);
      Allocator::global().reset_peaks();
      for (int step = 0; step < 2; ++step) {
        engine.backward(ag::cross_entropy(engine.forward(x), y));
        engine.step(1e-3);
      }
      made_peak = int64_t(Allocator::global().stats().peak_of(MemTag::master));
      zero::PeakInput in;
      static_cast<zero::StepLimits&>(in) = zero::step_limits(o);
      predicted = zero::predict_peak(engine.plan(), in).gathered;
    };
    int64_t none = 0, without = 0, made = 0, with = 0;
    run(none, without);
    {
      auto kind = zero::add_buffer_kind({"test unit scratch", zero::Span::unit,
                                         [](const zero::Plan& p, size_t b) { return p.buffers[b].padded * 4; },
                                         true, nullptr, MemTag::master});
      run(made, with);
    }
    const std::string where = "prefetch " + std::to_string(prefetch);
    EXPECT_EQ(none, 0) << where;
    const int64_t units_at_once = prefetch > 0 ? 2 : 1;
    EXPECT_EQ(made, units_at_once * unit * 4) << where;
    EXPECT_EQ(with - without, made) << where;
  }
}

// Note [gradient blocks]: with reduce_bucket_size an eighth of a hidden layer's 65,536-element
// weight, stages 2-3 make and reduce each layer's weight gradient in rounds (stage 3: its unit's bias waits
// for the weight's rounds). At N = 2 the comm bytes at backward's peak are the predictor's bucket
// term exactly and less than one whole weight gradient; at N = 1 (the fake group's ranks all hold
// rank 0's shard, so only one rank's trajectory is real) three steps take the losses of the run
// that reduces every gradient whole (the same products, rows at a time: bit for bit here).
TEST(StepSchedule, AGradientInBlocksIsNeverWholeAndTheRoundsArePredicted) {
  const auto [x, y] = zt::testing::wide_batch(3);
  for (int stage : {2, 3})
    for (DType dt : {DType::f32, DType::bf16})
      for (int N : {1, 2}) {
        const std::string where = "stage " + std::to_string(stage) + " " + dtype_name(dt) + " N=" + std::to_string(N);
        std::vector<float> losses[2];
        for (int blocked : {0, 1}) {
          zero::EngineOptions o;
          o.zero.stage = stage;
          o.dtype = dt;
          o.zero.reduce_bucket_size = blocked ? 8192 : int64_t(1) << 20;
          o.zero.stage3_param_persistence_threshold = 0;
          auto model = zt::testing::make_wide_model();
          zero::Engine engine(*model, comm::make_fake_group(0, N), o);
          size_t in_blocks = 0;
          for (const auto& b : engine.plan().buffers) in_blocks += b.block_elems > 0 ? 1 : 0;
          EXPECT_EQ(in_blocks, blocked ? 8u : 0u) << where;  // the hidden layers' (the output's has 2,560)
          int64_t runtime = 0;
          for (int step = 0; step < 3; ++step) {
            Tensor loss = ag::cross_entropy(engine.forward(x), y);
            losses[blocked].push_back(loss.item());
            Allocator::global().reset_peaks();
            const int64_t before = int64_t(Allocator::global().stats().of(MemTag::comm));
            engine.backward(loss);
            runtime = int64_t(Allocator::global().stats().peak_of(MemTag::comm)) - before;
            engine.step(1e-3);
          }
          zero::PeakInput in;
          static_cast<zero::StepLimits&>(in) = zero::step_limits(o);
          EXPECT_EQ(runtime, zero::predict_peak(engine.plan(), in).grad_buckets) << where << ", blocked " << blocked;
          if (blocked) {
            EXPECT_LT(runtime, 65536 * int64_t(dtype_size(dt))) << where;
          }
        }
        if (N == 1) {
          EXPECT_EQ(losses[0], losses[1]) << where;
        }
      }
}

// A GPT whose output projection is the embedding: its bucket (stage 3: its unit) opens at the
// head's backward, first, and launches last (Note [step schedule]); the runtime's bucket bytes
// are the prediction exactly at stages 1-3. With sparse gradients (Note [tied rows]) the dense
// part launches first and is kept, with the bucket's full gradient, until the embedding's rows
// are added at the end of backward: within the prediction at stages 1-2 (stage 3's unit holds
// wpe too, so it reduces densely). (At stage 0 the rows' exchange, whose size depends on the
// tokens, comes beside the kept dense part: outside the table, 9,112 bytes over it here.)
// Densely at stages 2-3 both ways: reduce_bucket_size 4,096 under wte's 16,384 elements sends each
// use's gradient in rounds (Note [gradient blocks]), 1M reduces it whole.
TEST(StepSchedule, ATiedEmbeddingsBucketIsPredicted) {
  const nn::TransformerConfig c = testing_util::tiny_gpt(512, 32);
  Generator g(17);
  std::vector<int32_t> v(2 * 13);
  for (auto& t : v) t = int32_t(g.below(512));
  const Tensor rows = Tensor::from_ints(v, {2, 13});
  const Tensor x = rows.slice(1, 0, 12).contiguous(), y = rows.slice(1, 1, 13).contiguous().reshape({24});
  for (int stage : {1, 2, 3})
    for (bool sparse : {true, false})
      for (int64_t bucket : {int64_t(4096), int64_t(1) << 20}) {
        if (bucket > 4096 && (sparse || stage < 2)) continue;
        zero::EngineOptions o;
        o.zero.stage = stage;
        o.sparse_gradients = sparse;
        o.zero.reduce_bucket_size = bucket;
        auto model = nn::make_gpt(c);
        zero::Engine engine(*model, comm::make_fake_group(0, 2), o);
        bool wte_in_rounds = false;  // stage 2's tied rows (sparse) keep their two parts
        for (const auto& b : engine.plan().buffers) wte_in_rounds |= b.block_elems > 0 && b.params[0].numel == 512 * 32;
        EXPECT_EQ(wte_in_rounds, stage >= 2 && bucket == 4096 && !(sparse && stage == 2)) << stage << " " << sparse;
        int64_t runtime = 0;
        for (int step = 0; step < 2; ++step) {
          Tensor logits = engine.forward(std::vector<Tensor>{x});
          Tensor loss = ag::cross_entropy(ag::reshape(logits, {24, 512}), y);
          Allocator::global().reset_peaks();
          const int64_t before = int64_t(Allocator::global().stats().of(MemTag::comm));
          engine.backward(loss);
          runtime = int64_t(Allocator::global().stats().peak_of(MemTag::comm)) - before;
          engine.step(1e-3);
        }
        if (sparse && stage < 3) {
          EXPECT_GT(engine.sparse_comm_bytes().tied_early, 0) << "stage " << stage;
        }
        zero::PeakInput in;
        static_cast<zero::StepLimits&>(in) = zero::step_limits(o);
        const int64_t predicted = zero::predict_peak(engine.plan(), in).grad_buckets;
        std::printf("[tied] stage %d, sparse %d, buckets of %lld: bucket bytes at their peak %lld, predicted %lld\n",
                    stage, int(sparse), (long long)bucket, (long long)runtime, (long long)predicted);
        if (sparse)
          EXPECT_LE(runtime, predicted) << "stage " << stage;
        else
          EXPECT_EQ(runtime, predicted) << "stage " << stage;
      }
}

}  // namespace
