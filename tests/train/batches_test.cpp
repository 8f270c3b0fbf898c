// Note [batch prefetch]: each micro-batch taken on the device holds the gathered host values,
// whether it was prefetched (the key after the one taken) or not (the first, a skipped key).
#include <gtest/gtest.h>

#include <vector>

#include "zt/train/batches.h"

namespace zt::train {
namespace {

// Step s, micro-batch m: inputs {s*10+m, ...} (f32) and targets of the same values (i32).
MicroBatch host_batch(BatchKey k) {
  const float v = float(k.step * 10 + k.micro);
  MicroBatch b;
  b.inputs = {Tensor::from_vector({v, v + 0.5f, v + 0.25f}, {3})};
  b.targets = Tensor::from_vector({v, v}, {2}, DType::i32);
  b.samples = 3;
  return b;
}

TEST(BatchPrefetch, EveryTakenBatchIsTheGatheredOneOnTheDevice) {
  std::vector<BatchKey> gathered;
  BatchPrefetcher p(Device::sim(), [&](BatchKey k) {
    gathered.push_back(k);
    return host_batch(k);
  });
  // Steps 0-1 with two micro-batches each, then step 3 (step 2 skipped), the last one.
  const std::vector<std::pair<BatchKey, std::optional<BatchKey>>> plan = {{{0, 0}, BatchKey{0, 1}},
                                                                          {{0, 1}, BatchKey{1, 0}},
                                                                          {{1, 0}, BatchKey{1, 1}},
                                                                          {{1, 1}, BatchKey{2, 0}},
                                                                          {{3, 0}, std::nullopt}};
  for (const auto& [key, next] : plan) {
    SCOPED_TRACE("step " + std::to_string(key.step) + " micro " + std::to_string(key.micro));
    const MicroBatch b = p.take(key, next);
    const MicroBatch want = host_batch(key);
    ASSERT_EQ(b.inputs.size(), 1u);
    EXPECT_EQ(b.inputs[0].device(), Device::sim());
    EXPECT_EQ(b.targets.device(), Device::sim());
    EXPECT_EQ(b.targets.dtype(), DType::i32);
    EXPECT_EQ(b.inputs[0].to_vector(), want.inputs[0].to_vector());
    EXPECT_EQ(b.targets.to_vector(), want.targets.to_vector());
    EXPECT_EQ(b.samples, 3);
  }
  EXPECT_EQ(p.prefetched(), 3);  // {0,1}, {1,0}, {1,1}; {0,0} and {3,0} were gathered when taken
  const std::vector<BatchKey> order = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {3, 0}};
  EXPECT_EQ(gathered, order);
}

// On the cpu nothing is sent ahead: each take is the gathered batch, the next key left alone.
TEST(BatchPrefetch, OnTheCpuATakeIsTheGatheredBatch) {
  std::vector<BatchKey> gathered;
  BatchPrefetcher p(Device::cpu(), [&](BatchKey k) {
    gathered.push_back(k);
    return host_batch(k);
  });
  const MicroBatch b = p.take({2, 1}, BatchKey{3, 0});
  EXPECT_EQ(b.inputs[0].device(), Device::cpu());
  EXPECT_EQ(b.inputs[0].to_vector(), host_batch({2, 1}).inputs[0].to_vector());
  EXPECT_EQ(gathered, (std::vector<BatchKey>{{2, 1}}));
  EXPECT_EQ(p.prefetched(), 0);
}

}  // namespace
}  // namespace zt::train
