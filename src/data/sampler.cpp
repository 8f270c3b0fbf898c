// Per-step, per-rank item indices (Note [global batch layout] in sampler.h).
#include "zt/data/sampler.h"

#include "zt/core/error.h"
#include "zt/data/mnist.h"

namespace zt::data {

StepSampler::StepSampler(int64_t n, const BatchLayout& layout, uint64_t seed, bool shuffle, const std::string& what)
    : n_(n), layout_(layout), seed_(seed), shuffle_(shuffle) {
  const BatchLayout& l = layout;
  ZT_CHECK(l.micro >= 1 && l.accumulation >= 1 && l.world >= 1 && 0 <= l.rank && l.rank < l.world,
           "[data] batch layout needs micro >= 1, accumulation >= 1, 0 <= rank < world; got micro ", l.micro,
           ", accumulation ", l.accumulation, ", rank ", l.rank, ", world ", l.world);
  ZT_CHECK(n >= 0, "[data] StepSampler: n must be >= 0, got ", n);
  ZT_CHECK_AS(ErrorKind::config, l.global() <= n, "[data] the global batch of ", l.global(), " (micro ", l.micro,
              " x accumulation ", l.accumulation, " x world ", l.world, ") exceeds the ", n, " ", what);
}

const std::vector<int64_t>& StepSampler::order_of(int64_t step, int64_t* in_epoch) const {
  ZT_CHECK(step >= 0, "[data] step must be >= 0, got ", step);
  const int64_t epoch = step / steps_per_epoch();
  *in_epoch = step % steps_per_epoch();
  if (epoch != cached_epoch_) {
    order_ = epoch_order(n_, seed_, epoch, shuffle_);
    cached_epoch_ = epoch;
  }
  return order_;
}

std::vector<int64_t> StepSampler::micro_batch(int64_t step, int64_t m) const {
  ZT_CHECK(0 <= m && m < layout_.accumulation, "[data] micro-batch ", m, " is outside 0..", layout_.accumulation - 1);
  int64_t in_epoch = 0;
  const std::vector<int64_t>& order = order_of(step, &in_epoch);
  const int64_t begin = in_epoch * layout_.global() + layout_.micro_begin(m);
  return {order.begin() + begin, order.begin() + begin + layout_.micro};
}

std::vector<int64_t> StepSampler::global_batch(int64_t step) const {
  int64_t in_epoch = 0;
  const std::vector<int64_t>& order = order_of(step, &in_epoch);
  const int64_t begin = in_epoch * layout_.global();
  return {order.begin() + begin, order.begin() + begin + layout_.global()};
}

}  // namespace zt::data
