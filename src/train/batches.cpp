#include "zt/train/batches.h"

#include <utility>

namespace zt::train {

BatchPrefetcher::Upload::~Upload() {
  if (pinned.empty()) return;
  try {
    landed.synchronize();
  } catch (...) {  // a device error is the run's error, reported where it happened
  }
}

BatchPrefetcher::Upload BatchPrefetcher::send_up(BatchKey key) const {
  Upload u(key, gather_(key));
  auto up = [&](Tensor& t) {
    if (!t.defined()) return;
    const Tensor host = t.contiguous();
    Tensor pinned = Tensor::empty_pinned(host.shape(), host.dtype(), MemTag::activation);
    pinned.copy_(host);
    t = Tensor::empty(host.shape(), host.dtype(), MemTag::activation, device_);
    u.pinned.push_back(pinned);
    u.landed = copy_on_copy_stream(t, pinned);  // in the copy stream's order: the last covers all
  };
  for (Tensor& t : u.batch.inputs) up(t);
  up(u.batch.targets);
  return u;
}

MicroBatch BatchPrefetcher::take(BatchKey key, std::optional<BatchKey> next) {
  if (device_.is_cpu()) return gather_(key);
  std::optional<Upload> now;
  if (ahead_ && ahead_->key == key) {
    now.emplace(std::move(*ahead_));
    ++hits_;
  }
  ahead_.reset();  // a batch not taken lands and goes back before another is made
  if (!now) now.emplace(send_up(key));
  now->landed.make_compute_wait();
  taken_.reset();                            // landed long ago: its pinned sources go back
  if (next) ahead_.emplace(send_up(*next));  // before this micro-batch's forward is queued, so it overlaps it
  MicroBatch out = std::move(now->batch);
  now->batch = MicroBatch{};
  taken_.emplace(std::move(*now));
  return out;
}

}  // namespace zt::train
