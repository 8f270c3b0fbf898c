// Shard arithmetic over awkward sizes: sizes not divisible by N, shards that are only
// padding, N larger than a small buffer, parameters straddling ranks.
#include <gtest/gtest.h>

#include "zt/core/error.h"
#include "zt/zero/engine_options.h"
#include "zt/zero/layout.h"
#include "zt/zero/plan.h"

using namespace zt::zero;
using zt::DType;

TEST(Layout, PaddedSizeRoundsToWorldTimesAlignment) {
  EXPECT_EQ(padded_size(0, 4), 0);
  EXPECT_EQ(padded_size(1, 1), kAlignElems);
  EXPECT_EQ(padded_size(kAlignElems, 1), kAlignElems);
  EXPECT_EQ(padded_size(kAlignElems + 1, 1), 2 * kAlignElems);
  EXPECT_EQ(padded_size(446, 3), 480);            // 3*16 = 48; 10 * 48
  EXPECT_EQ(padded_size(5, 8), 8 * kAlignElems);  // N larger than the buffer
  EXPECT_EQ(padded_size(7, 3, 1), 9);
  EXPECT_THROW(padded_size(5, 0), zt::Error);
}

TEST(Layout, ShardRangesTileTheBuffer) {
  for (int world : {1, 2, 3, 4, 7}) {
    for (int64_t n : {1, 15, 16, 17, 446, 1000}) {
      const int64_t p = padded_size(n, world);
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        Range s = shard_range(p, world, r);
        EXPECT_EQ(s.begin, next);
        EXPECT_EQ(s.size(), p / world);
        EXPECT_EQ(s.begin % kAlignElems, 0);
        next = s.end;
      }
      EXPECT_EQ(next, p);
    }
  }
  EXPECT_THROW(shard_range(48, 3, 3), zt::Error);
  EXPECT_THROW(shard_range(47, 3, 0), zt::Error);
}

TEST(Layout, OnlyPaddingShardsExist) {
  // 5 elements over 8 ranks: rank 0 holds all 5, ranks 1..7 hold padding only.
  const int64_t p = padded_size(5, 8);
  Range data{0, 5};
  EXPECT_EQ(intersect(shard_range(p, 8, 0), data).size(), 5);
  for (int r = 1; r < 8; ++r) EXPECT_TRUE(intersect(shard_range(p, 8, r), data).empty());
}

TEST(Layout, ParameterStraddlesRanks) {
  // A parameter at [10, 40) in a 48-element buffer over 3 ranks touches all three shards.
  Range prm{10, 40};
  int64_t covered = 0;
  for (int r = 0; r < 3; ++r) covered += intersect(shard_range(48, 3, r), prm).size();
  EXPECT_EQ(covered, 30);
  EXPECT_EQ(intersect(shard_range(48, 3, 1), prm).size(), 16);
}

TEST(Layout, BucketsFormFromTheBackAndKeepForwardOrderInside) {
  std::vector<int64_t> numels = {100, 10, 50, 7, 300};
  auto b = plan_buckets(numels, 60, 2);
  ASSERT_EQ(b.size(), 4u);  // {300}, {50, 7}, {10}, {100}
  EXPECT_EQ(b[0].params.size(), 1u);
  EXPECT_EQ(b[0].params[0].index, 4u);
  ASSERT_EQ(b[1].params.size(), 2u);
  EXPECT_EQ(b[1].params[0].index, 2u);
  EXPECT_EQ(b[1].params[1].index, 3u);
  EXPECT_EQ(b[1].params[1].offset, 50);
  EXPECT_EQ(b[1].numel, 57);
  EXPECT_EQ(b[1].padded, 64);
  auto one = plan_buckets(numels, 1 << 20, 3);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].numel, 467);
  EXPECT_EQ(one[0].padded, 480);
  EXPECT_THROW(plan_buckets(numels, 0, 1), zt::Error);
}

TEST(Layout, UnitsFollowTheirParameterLists) {
  std::vector<int64_t> numels = {6, 3, 4, 2};
  auto u = plan_units(numels, {{0, 1}, {2, 3}}, 4);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].numel, 9);
  EXPECT_EQ(u[1].params[1].offset, 4);
  EXPECT_EQ(u[1].padded, 64);
}

TEST(Layout, SoloParametersGetABucketOfTheirOwn) {
  std::vector<int64_t> numels = {10, 20, 5, 7};
  // Without flags one bucket; a solo parameter closes the bucket before and after it.
  ASSERT_EQ(plan_buckets(numels, 1000, 2).size(), 1u);
  auto b = plan_buckets(numels, 1000, 2, {false, true, false, false});
  ASSERT_EQ(b.size(), 3u);  // {5, 7}, {20}, {10}
  EXPECT_EQ(b[0].params.size(), 2u);
  ASSERT_EQ(b[1].params.size(), 1u);
  EXPECT_EQ(b[1].params[0].index, 1u);
  EXPECT_EQ(b[1].params[0].offset, 0);
  EXPECT_EQ(b[2].params[0].index, 0u);
  // Solo first and last: nothing empty is emitted around them.
  auto edge = plan_buckets(numels, 1000, 2, {true, false, false, true});
  ASSERT_EQ(edge.size(), 3u);  // {7}, {20, 5}, {10}
  EXPECT_EQ(edge[0].params[0].index, 3u);
  EXPECT_EQ(edge[1].params.size(), 2u);
  EXPECT_EQ(edge[2].params[0].index, 0u);
  EXPECT_THROW(plan_buckets(numels, 1000, 2, {true}), zt::Error);
}

TEST(Plan, SparseBuffersHoldOneEligibleParameter) {
  PlanInput in;
  in.numels = {40, 8, 16, 3};
  in.sparse = {true, false, true, false};
  in.units = {{0}, {1}, {2, 3}};  // stage 3: parameter 2 shares its unit, so it stays dense
  in.reduce_bucket_size = 1000;
  const Plan p0 = make_plan(in, make_policy(0, DType::f32, {}, {}), 2);
  ASSERT_EQ(p0.buffers.size(), 4u);  // {3}, {16}, {8}, {40}
  EXPECT_FALSE(p0.buffers[0].sparse);
  EXPECT_TRUE(p0.buffers[1].sparse);
  EXPECT_FALSE(p0.buffers[2].sparse);
  EXPECT_TRUE(p0.buffers[3].sparse);
  const Plan p3 = make_plan(in, make_policy(3, DType::f32, {}, {}), 2);
  ASSERT_EQ(p3.buffers.size(), 3u);
  EXPECT_TRUE(p3.buffers[0].sparse);
  EXPECT_FALSE(p3.buffers[1].sparse);
  EXPECT_FALSE(p3.buffers[2].sparse);
  in.sparse.clear();  // sparse_gradients off
  for (auto& b : make_plan(in, make_policy(2, DType::f32, {}, {}), 2).buffers) EXPECT_FALSE(b.sparse);
}

Plan one_buffer_plan(int stage, DType dt, std::optional<DType> accum = std::nullopt) {
  // One buffer of P = 960 padded elements (divisible by N = 4), Adam (k = 8).
  PlanInput in;
  in.numels = {950};
  in.units = {{0}};
  in.persistence_threshold = 0;
  return make_plan(in, make_policy(stage, dt, accum, std::nullopt), 4);
}

TEST(Plan, MemoryFormulasMatchTheDesignTable) {
  const int64_t P = 960, N = 4;
  EXPECT_EQ(one_buffer_plan(0, DType::f32).memory().total(), 16 * P);
  EXPECT_EQ(one_buffer_plan(1, DType::f32).memory().total(), 8 * P + 8 * P / N);
  EXPECT_EQ(one_buffer_plan(2, DType::f32).memory().total(), 4 * P + 12 * P / N);
  EXPECT_EQ(one_buffer_plan(3, DType::f32).memory().total(), 16 * P / N);
  for (DType dt : {DType::bf16, DType::f16}) {  // mixed precision: 2Ψ + 2Ψ + 12Ψ, sharded
    EXPECT_EQ(one_buffer_plan(0, dt).memory().total(), 16 * P);
    EXPECT_EQ(one_buffer_plan(1, dt).memory().total(), 4 * P + 12 * P / N);
    EXPECT_EQ(one_buffer_plan(2, dt).memory().total(), 2 * P + 14 * P / N);
    EXPECT_EQ(one_buffer_plan(3, dt).memory().total(), 16 * P / N);
    EXPECT_EQ(one_buffer_plan(2, dt).memory().master, 4 * P / N);
  }
  EXPECT_EQ(one_buffer_plan(2, DType::bf16, DType::f32).memory().grad, 4 * P / N);  // fp32 accumulation
  EXPECT_EQ(one_buffer_plan(0, DType::bf16, DType::f32).memory().grad, 4 * P);
  PlanInput in;
  in.numels = {950};
  in.units = {{0}};
  in.persistence_threshold = 950;  // the unit stays gathered
  EXPECT_EQ(make_plan(in, make_policy(3, DType::f32, {}, {}), 4).memory().param, 4 * P / N + 4 * P);
  EXPECT_THROW(make_policy(4, DType::f32, {}, {}), zt::Error);
  EXPECT_THROW(make_policy(1, DType::i32, {}, {}), zt::Error);
}

TEST(Plan, LargestModelThatFits) {
  const int64_t gib = int64_t(1) << 30;
  auto pol = [](int stage, DType dt) { return make_policy(stage, dt, {}, {}); };
  EXPECT_EQ(max_params_that_fit(16 * gib, pol(0, DType::f32), 8, 8), gib);
  EXPECT_EQ(max_params_that_fit(16 * gib, pol(3, DType::f32), 8, 8), 8 * gib);
  EXPECT_EQ(max_params_that_fit(16 * gib, pol(0, DType::bf16), 8, 8), gib);
  EXPECT_EQ(max_params_that_fit(16 * gib, pol(3, DType::bf16), 8, 8), 8 * gib);
  EXPECT_GT(max_params_that_fit(16 * gib, pol(2, DType::f32), 8, 8),
            max_params_that_fit(16 * gib, pol(1, DType::f32), 8, 8));
  EXPECT_GT(max_params_that_fit(16 * gib, pol(1, DType::bf16), 8, 8),
            max_params_that_fit(16 * gib, pol(1, DType::f32), 8, 8));
}

// Note [gradient buckets]: at stages 2-3 a bucket holds at most the largest parameter (at least
// 1M elements) whatever reduce_bucket_size says; stages 0-1 keep reduce_bucket_size.
TEST(Plan, GradientBucketsAtStagesTwoAndThreeHoldAtMostTheLargestParameter) {
  PlanInput in;
  in.numels = {3000000, 4000, 3000000, 4000, 2000000, 10};
  in.reduce_bucket_size = 500000000;
  for (int stage = 0; stage <= 2; ++stage) {
    const Plan p = make_plan(in, make_policy(stage, zt::DType::f32, std::nullopt, std::nullopt), 2);
    if (stage < 2) {
      EXPECT_EQ(p.buffers.size(), 1u) << stage;
      EXPECT_EQ(p.grad_bucket_elems, 500000000) << stage;
      continue;
    }
    EXPECT_EQ(p.grad_bucket_elems, 3000000);
    for (const auto& b : p.buffers) EXPECT_LE(b.numel, 3000000) << "stage 2 bucket of " << b.numel;
    EXPECT_GE(p.buffers.size(), 3u);
  }
  in.numels = {1000, 2000, 3000};  // small models: buckets of 1M elements at least
  EXPECT_EQ(make_plan(in, make_policy(2, zt::DType::f32, std::nullopt, std::nullopt), 2).buffers.size(), 1u);
  in.reduce_bucket_size = 2500;  // a smaller reduce_bucket_size still rules
  EXPECT_EQ(make_plan(in, make_policy(2, zt::DType::f32, std::nullopt, std::nullopt), 2).grad_bucket_elems, 2500);
}

// Note [gradient blocks]: at stages 2-3 a buffer whose first parameter exceeds reduce_bucket_size
// (the others not) is reduced in rounds of reduce_bucket_size / N elements per rank, with
// temporaries of whole rows for each of its parameters; never at stages 0-1, for sparse or tied
// rows, with quantized gradients, or with two large parameters (with gradients sent to the host too).
TEST(Plan, ABufferWhoseFirstParameterExceedsTheBucketIsReducedInBlocks) {
  PlanInput in;
  in.numels = {5000, 10, 3000};  // a [100, 50] weight, its bias, a [60, 50] weight
  in.row_elems = {50, 1, 50};
  in.units = {{0, 1}, {2}};
  in.reduce_bucket_size = 4000;
  auto plan = [&](int stage) { return make_plan(in, make_policy(stage, DType::f32, {}, {}), 2); };
  for (int stage : {0, 1})
    for (const auto& b : plan(stage).buffers) EXPECT_EQ(b.block_elems, 0) << stage;
  const Plan p2 = plan(2);  // buckets from the back: {10, 3000}, {5000}
  ASSERT_EQ(p2.buffers.size(), 2u);
  EXPECT_EQ(p2.buffers[0].block_elems, 0);
  EXPECT_EQ(p2.buffers[1].block_elems, 2000);
  EXPECT_EQ(p2.buffers[1].block_rows_elems, 41 * 50);  // 2,000 elements start inside a row: 40 rows + 1
  const Plan p3 = plan(3);
  ASSERT_EQ(p3.buffers.size(), 2u);
  EXPECT_EQ(p3.buffers[0].block_elems, 2000);
  EXPECT_EQ(p3.buffers[0].block_rows_elems, 41 * 50 + 10);  // and the bias, whole
  EXPECT_EQ(p3.buffers[1].block_elems, 0);                  // 3,000 elements: whole
  in.reduce_bucket_size = 6000;                             // each buffer's parameters fit: nothing in blocks
  for (const auto& b : plan(3).buffers) EXPECT_EQ(b.block_elems, 0);
  in.reduce_bucket_size = 1000;  // rounds of 500; {2} now in blocks too; the bias never leads one
  EXPECT_EQ(plan(3).buffers[1].block_elems, 500);
  in.units = {{1, 0}};  // sorted into {0, 1}: the weight leads
  EXPECT_GT(plan(3).buffers[0].block_elems, 0);
  in.numels = {5000, 3000};  // two large parameters: whole
  in.units = {{0, 1}};
  in.row_elems = {50, 50};
  EXPECT_EQ(plan(3).buffers[0].block_elems, 0);
  in.units = {{0}, {1}};
  in.tied_rows = {true, false};  // stages 0-2: tied rows travel in their two parts
  EXPECT_EQ(plan(2).buffers[1].block_elems, 0);
  EXPECT_GT(plan(2).buffers[0].block_elems, 0);
  in.tied_rows.clear();
  Policy q = make_policy(2, DType::f32, {}, {});
  q.wire.gradient_bits = 4;  // qgZ quantizes whole buckets
  for (const auto& b : make_plan(in, q, 2).buffers) EXPECT_EQ(b.block_elems, 0);
  q.wire.gradient_bits = 0;
  q.grads_to_host = true;  // ZeRO-Offload: the rounds fill a shard made for the pass (Note [host gradient shard])
  EXPECT_GT(make_plan(in, q, 2).buffers[0].block_elems, 0);
}

// Note [placement]: the offload devices are read once into a placement, which becomes the policy's
// residences with the swap settings; "nvme" alone means files, and the defaults are the config's.
TEST(Placement, OffloadDevicesAndAioKeysBecomeResidencesAndSwapSettings) {
  zt::config::ZeroConfig z;
  zt::config::AioConfig aio;
  Policy p = make_policy(3, DType::f32, {}, {});
  set_placement(p, configured_placement(z, !p.device.is_cpu()), z, aio, "run");
  EXPECT_EQ(p.optimizer_residence, Residence::memory);
  EXPECT_EQ(p.param_residence, Residence::memory);
  const SwapOptions defaults;
  EXPECT_EQ(p.swap.tile_elems, defaults.tile_elems);  // sub_group_size not given
  EXPECT_EQ(p.swap.buffers, defaults.buffers);
  EXPECT_EQ(p.swap.block_bytes, defaults.block_bytes);
  EXPECT_EQ(p.swap.queue_depth, defaults.queue_depth);
  for (const char* device : {"none", "cpu", "auto"}) {
    z.offload_optimizer.device = z.offload_param.device = device;
    Policy q = make_policy(3, DType::f32, {}, {});
    set_placement(q, configured_placement(z, !q.device.is_cpu()), z, aio, "run");
    EXPECT_EQ(q.optimizer_residence, Residence::memory) << device;
    EXPECT_EQ(q.param_residence, Residence::memory) << device;
  }
  z.offload_optimizer.device = z.offload_param.device = "nvme";
  z.offload_optimizer.nvme_path = "/disk/a";
  z.offload_param.nvme_path = "/disk/b";
  z.offload_optimizer.buffer_count = 6;
  z.sub_group_size = 4096;
  aio.block_size = 8192;
  aio.queue_depth = 3;
  aio.single_submit = true;
  aio.overlap_events = false;
  set_placement(p, configured_placement(z, !p.device.is_cpu()), z, aio, "gpt");
  EXPECT_EQ(p.optimizer_residence, Residence::file);
  EXPECT_EQ(p.param_residence, Residence::file);
  EXPECT_EQ(p.swap.dir, "/disk/a/gpt");
  EXPECT_EQ(p.swap.param_dir, "/disk/b/gpt");
  EXPECT_EQ(p.swap.tile_elems, 4096);
  EXPECT_EQ(p.swap.buffers, 6);
  EXPECT_EQ(p.swap.block_bytes, 8192);
  EXPECT_EQ(p.swap.queue_depth, 3);
  EXPECT_TRUE(p.swap.single_submit);
  EXPECT_FALSE(p.swap.overlap_events);
  Policy bare = make_policy(3, DType::f32, {}, {});
  set_placement(bare, configured_placement(z, !bare.device.is_cpu()), z, aio,
                "");  // no run name: the folders are the nvme paths themselves
  EXPECT_EQ(bare.swap.dir, "/disk/a");
  EXPECT_EQ(bare.swap.param_dir, "/disk/b");
}

// Beside a device "cpu" is pinned host memory; a placement the options carry is what the engine
// applies, whatever the offload strings say, and its lowered limits bound the options.
TEST(Placement, TheOptionsCarryThePlacementAsAValue) {
  zt::config::ZeroConfig z;
  z.offload_optimizer.device = "cpu";
  z.offload_param.device = "auto";
  EXPECT_EQ(configured_placement(z, true), (Placement{Residence::host, Residence::memory}));
  EXPECT_EQ(configured_placement(z, false), (Placement{Residence::memory, Residence::memory}));
  EngineOptions o;
  o.zero = z;
  o.zero.reduce_bucket_size = 1000;
  EXPECT_EQ(placement_of(o), (Placement{}));
  const Placement chosen{Residence::file, Residence::file, true, 64};
  const EngineOptions e = with_placement(o, chosen);
  EXPECT_EQ(placement_of(e), chosen);
  EXPECT_EQ(e.max_inflight_reduce_elems, 1);
  EXPECT_EQ(e.zero.stage3_prefetch_bucket_size, 0);
  EXPECT_EQ(e.zero.stage3_max_reuse_distance, 0);
  EXPECT_EQ(e.zero.reduce_bucket_size, 64);
  EXPECT_EQ(e.zero.offload_optimizer.device, "cpu");  // the strings stay the config's; nothing reads them
}
