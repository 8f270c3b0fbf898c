// Run under mpirun -np N (and with ZT_COMM_NODE_RANKS=2 at N = 4: two "nodes"): ZeRO++ (Note
// [ZeRO++] in zero/wire.h). hpZ alone changes where backward gathers from, never the values, so it
// follows plain stage 3 bit for bit; qwZ and qgZ quantize, so they stay close to it and differ.
#include <map>

#include "zero_harness.h"
#include "zt/autograd/autograd.h"
#include "zt/nn/transformer.h"
#include "../common/tiny_gpt.h"

using namespace zt;
using namespace zt::testing;
using zt::testing::g_world;

namespace {

struct PlusPlus {
  bool weights = false, gradients = false;
  int bits = 4;
  int64_t hpz = 1;
};

struct Outcome {
  RunResult run;
  uint64_t bytes = 0, cross_node = 0;
  std::string summary;
};

Outcome train_pp(RunSpec s, const PlusPlus& pp) {
  const int64_t N = g_world->size();
  const Data d = make_data(s.steps * s.micro * s.gas * N);
  zero::EngineOptions o = options(s);
  o.zero.stage3_max_reuse_distance = 0;  // every unit released after forward: backward gathers it again
  o.zero.zero_quantized_weights = pp.weights;
  o.zero.zero_quantized_gradients = pp.gradients;
  o.zero.zero_quantized_gradients_bits = pp.bits;
  o.zero.zero_hpz_partition_size = pp.hpz;
  auto model = make_model();
  zero::Engine engine(*model, g_world, o);
  const uint64_t bytes0 = engine.comm_bytes(), cross0 = engine.cross_node_bytes();  // g_world counts every run
  Outcome out;
  for (int64_t step = 0; step < s.steps; ++step) {
    const double loss = train_step(engine, s, d, step);
    out.run.stats.push_back(engine.step(1e-2));
    out.run.losses.push_back(g_world->all_reduce_scalar(loss) / double(N));
  }
  out.bytes = engine.comm_bytes() - bytes0;
  out.cross_node = engine.cross_node_bytes() - cross0;
  out.summary = engine.zeropp_summary();
  engine.for_each_full_param([&](const std::string&, const Tensor& p) { out.run.params.push_back(p.to_vector()); });
  return out;
}

int nodes() { return g_world->size() / g_world->local_size(); }

double largest_param_change(const RunResult& a, const RunResult& b) {
  double d = 0;
  for (size_t p = 0; p < a.params.size(); ++p)
    for (size_t i = 0; i < a.params[p].size(); ++i) d = std::max(d, double(std::abs(a.params[p][i] - b.params[p][i])));
  return d;
}

using testing_util::tiny_gpt;  // a GPT of two 16-wide blocks over 37 tokens

RunSpec stage3() {
  RunSpec s;
  s.stage = 3;
  s.steps = 8;
  return s;
}

}  // namespace

// The secondary pieces hold exactly what the forward gather brought: the same trajectory, and
// backward's gathers move to the secondary group (one gather per unit left on the whole group).
TEST(ZeroPlusPlus, HpzAloneFollowsPlainStage3BitForBit) {
  const int64_t N = g_world->size();
  if (N % 2 != 0) GTEST_SKIP() << "zero_hpz_partition_size 2 needs an even world";
  const Outcome plain = train_pp(stage3(), {}), hpz = train_pp(stage3(), {false, false, 4, 2});
  EXPECT_EQ(hpz.run.losses, plain.run.losses);
  EXPECT_EQ(hpz.run.params, plain.run.params);
  EXPECT_EQ(hpz.summary, "backward gathers over 2 ranks");
  if (nodes() == 2 && g_world->local_size() == 2) {  // the secondary group is the node: backward crosses nothing
    EXPECT_LT(double(hpz.cross_node), 0.6 * double(plain.cross_node));
  }
}

// Every stage's quantized gradients (and stage 3's int8 weights) across nodes: close to plain,
// and different from it where something crosses nodes; on one node nothing is quantized.
TEST(ZeroPlusPlus, QuantizedTrafficStaysCloseToPlain) {
  for (int stage : {1, 2, 3})
    for (int bits : {4, 8}) {
      RunSpec s = stage3();
      s.stage = stage;
      const PlusPlus pp{stage == 3, true, bits, 1};
      const Outcome plain = train_pp(s, {}), q = train_pp(s, pp);
      const std::string what = "stage " + std::to_string(stage) + ", int" + std::to_string(bits);
      for (size_t i = 0; i < plain.run.losses.size(); ++i)
        EXPECT_NEAR(q.run.losses[i], plain.run.losses[i], 2e-2 * std::max(1.0, std::abs(plain.run.losses[i])))
            << what << ", step " << i + 1;
      // AdamW moves an element by about lr per step whatever its gradient's size, so where
      // quantization flips a small gradient's sign the parameters part by up to 2 lr per step.
      EXPECT_LT(largest_param_change(q.run, plain.run), 2 * 1e-2 * double(s.steps)) << what;
      if (nodes() > 1) {
        EXPECT_NE(q.run.params, plain.run.params) << what;  // it did quantize
        EXPECT_LT(q.cross_node, plain.cross_node) << what;
      } else if (stage < 3) {
        EXPECT_EQ(q.run.params, plain.run.params) << what;  // one node: dense
        EXPECT_EQ(q.summary, "gradients dense (one node: nothing crosses)");
      }
    }
}

// fp16 with qgZ: the node average is taken in fp32 (as the dense path) and the decoded values sum
// in fp32, so the quantized path skips no more steps for overflow than plain does, and stays
// close to it.
TEST(ZeroPlusPlus, Fp16QuantizedGradientsOverflowNoSoonerThanDense) {
  RunSpec s = stage3();
  s.stage = 2;
  s.dtype = DType::f16;
  s.initial_scale_power = 20;  // high enough that the first steps overflow and the scale settles
  s.steps = 16;
  const Outcome plain = train_pp(s, {}), q = train_pp(s, {false, true, 8, 1});
  int skipped_plain = 0, skipped_q = 0;
  for (const auto& st : plain.run.stats) skipped_plain += st.skipped;
  for (const auto& st : q.run.stats) skipped_q += st.skipped;
  EXPECT_GT(skipped_plain, 0);  // the case happened
  EXPECT_LT(skipped_plain, int(s.steps));
  EXPECT_LE(skipped_q, skipped_plain);  // fewer where plain's mpi sums in 16 bits (one rank per node)
  for (size_t i = 0; i < plain.run.losses.size(); ++i)
    EXPECT_NEAR(q.run.losses[i], plain.run.losses[i], 2e-2 * std::max(1.0, std::abs(plain.run.losses[i])));
}

// Cross-node bytes of stage 3 with all three on, against plain stage 3 (issue 20's bound: 0.3x).
TEST(ZeroPlusPlus, AllThreeCutStage3CrossNodeBytes) {
  if (nodes() != 2 || g_world->local_size() != 2) GTEST_SKIP() << "needs two nodes of two ranks";
  RunSpec s = stage3();
  s.steps = 3;
  const Outcome plain = train_pp(s, {}), pp = train_pp(s, {true, true, 4, 2});
  EXPECT_EQ(pp.summary, "int8 weights, int4 gradients across 2 nodes, backward gathers over 2 ranks");
  ASSERT_GT(plain.cross_node, 0u);
  const double ratio = double(pp.cross_node) / double(plain.cross_node);
  // int8 forward gathers (1/4 + scales), no backward gathers, int4 gradients (1/8 + scales), of
  // 3 f32 volumes; the tiny model's 256-value blocks are mostly partial, so its scales weigh more.
  EXPECT_LT(ratio, 0.3) << pp.cross_node << " of " << plain.cross_node;
  std::printf("[rank %d] stage-3 cross-node bytes with ZeRO++: %.3f of plain\n", g_world->rank(), ratio);
}

// The pieces exist from a unit's forward gather to the update: after backward, before step(),
// the parameter bytes exceed plain stage 3's by exactly 1/P of the non-persistent units
// (PeakEstimate::secondary); after the step they are gone (nothing at rest).
TEST(ZeroPlusPlus, HpzPiecesAreOnePthOfTheUnitsUntilTheUpdate) {
  if (g_world->size() % 2 != 0) GTEST_SKIP() << "zero_hpz_partition_size 2 needs an even world";
  RunSpec s = stage3();
  s.persistence = 50;  // some units persistent: they keep no piece
  const Data d = make_data(s.micro * s.gas * g_world->size());
  int64_t param_bytes[2][2], pieces = 0;
  for (int64_t hpz : {1, 2}) {
    zero::EngineOptions o = options(s);
    o.zero.stage3_max_reuse_distance = 0;
    o.zero.zero_hpz_partition_size = hpz;
    Allocator::global().release_cached();
    auto model = make_model();
    zero::Engine engine(*model, g_world, o);
    train_step(engine, s, d, 0);
    param_bytes[hpz - 1][0] = int64_t(allocator_for(test_device()).stats().of(MemTag::param));
    engine.step(1e-2);
    param_bytes[hpz - 1][1] = int64_t(allocator_for(test_device()).stats().of(MemTag::param));
    if (hpz == 2)
      for (size_t b = 0; b < engine.plan().buffers.size(); ++b)
        if (!engine.plan().persistent[b]) pieces += engine.plan().buffers[b].padded / 2 * 4;
  }
  ASSERT_GT(pieces, 0);
  EXPECT_EQ(param_bytes[1][0] - param_bytes[0][0], pieces);
  EXPECT_EQ(param_bytes[1][1], param_bytes[0][1]);
}

// Units kept gathered across the update hold qwZ's values (the next forward's), yet what
// consolidation yields (checkpoints, exported weights) is every rank's exact shard. A tiny GPT
// whose first unit (wte) stays gathered across the update, as in the 5M GPT of BENCHMARKS.md.
TEST(ZeroPlusPlus, ConsolidationYieldsExactValuesOfKeptQuantizedUnits) {
  const nn::TransformerConfig c = tiny_gpt();
  auto model = nn::make_gpt(c);
  zero::EngineOptions o = options(stage3());
  o.zero.zero_quantized_weights = true;
  o.zero.stage3_prefetch_bucket_size = 1 << 20;  // backward prefetches wte, which then stays gathered
  zero::Engine engine(*model, g_world, o);
  Generator g(17);
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> v(2 * 13);
    for (auto& t : v) t = int32_t(g.below(37));
    const Tensor rows = Tensor::from_ints(v, {2, 13});
    Tensor x = rows.slice(1, 0, 12).contiguous(), y = rows.slice(1, 1, 13).contiguous().reshape({24}).to(test_device());
    for (int m = 0; m < 2; ++m)
      engine.backward(ag::cross_entropy(ag::reshape(engine.forward(std::vector<Tensor>{x}), {24, 37}), y));
    engine.step(1e-2);
  }
  std::map<std::string, std::vector<float>> full;
  engine.for_each_full_param([&](const std::string& name, const Tensor& p) { full[name] = p.to_vector(); });
  int64_t compared = 0;
  for (const zero::ShardState& st : engine.shard_states()) {
    std::vector<float> flat(size_t(engine.plan().buffers[st.buffer].padded), 0.f);
    for (const zero::ParamSlot& slot : engine.plan().buffers[st.buffer].params) {
      const std::vector<float>& v = full.at(engine.param_names()[slot.index]);
      std::copy(v.begin(), v.end(), flat.begin() + slot.offset);
    }
    const std::vector<float> mine = st.tensors.at(0).tensor.to_vector();
    for (int64_t i = 0; i < st.numel; ++i, ++compared)
      ASSERT_EQ(flat[size_t(st.offset + i)], mine[size_t(i)]) << "buffer " << st.buffer << " element " << st.offset + i;
  }
  EXPECT_GT(compared, 0);
}

// Note [f32 compute]: an evaluation forward re-gathers a unit kept with qwZ's values exactly, and
// the f32 copy the model computes with follows: the logits are those of the exact weights.
TEST(ZeroPlusPlus, AnEvaluationOnTheF32PathComputesWithTheExactValuesOfKeptUnits) {
  const nn::TransformerConfig c = tiny_gpt();
  auto model = nn::make_gpt(c);
  RunSpec s = stage3();
  s.dtype = DType::bf16;
  s.f32_compute = true;
  zero::EngineOptions o = options(s);
  o.zero.zero_quantized_weights = true;
  o.zero.stage3_prefetch_bucket_size = 1 << 20;  // backward prefetches wte, which then stays gathered
  zero::Engine engine(*model, g_world, o);
  Generator g(17);
  Tensor x;
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> v(2 * 13);
    for (auto& t : v) t = int32_t(g.below(37));
    const Tensor rows = Tensor::from_ints(v, {2, 13});
    x = rows.slice(1, 0, 12).contiguous();
    const Tensor y = rows.slice(1, 1, 13).contiguous().reshape({24}).to(test_device());
    for (int m = 0; m < 2; ++m)
      engine.backward(ag::cross_entropy(ag::reshape(engine.forward(std::vector<Tensor>{x}), {24, 37}), y));
    engine.step(1e-2);
  }
  std::vector<float> got;
  {
    autograd::NoGradGuard no_grad;
    got = engine.forward(std::vector<Tensor>{x}).to(Device::cpu()).to_vector();
  }
  std::map<std::string, std::vector<float>> full;  // the exact bf16 values, as saved
  engine.for_each_full_param([&](const std::string& name, const Tensor& p) { full[name] = p.to_vector(); });
  auto plain = nn::make_gpt(c);  // f32, holding exactly those values
  for (auto& [name, p] : plain->named_parameters())
    if (full.count(name)) p.copy_(Tensor::from_vector(full.at(name), p.shape()));
  std::vector<float> want;
  {
    autograd::NoGradGuard no_grad;
    want = (*plain)(x).to_vector();
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5f * std::max(1.f, std::abs(want[i]))) << "logit " << i;
}

TEST(ZeroPlusPlus, HpzPartitionMustDivideTheWorld) {
  const int64_t N = g_world->size();
  if (N != 3 && N != 4) GTEST_SKIP();
  zero::EngineOptions o = options(stage3());
  o.zero.zero_hpz_partition_size = N == 4 ? 3 : 2;
  auto model = make_model();
  try {
    zero::Engine engine(*model, g_world, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::config);
    EXPECT_NE(std::string(e.what()).find(N == 4 ? "nearest valid: 2 or 4" : "nearest valid: 1 or 3"), std::string::npos)
        << e.what();
  }
}
