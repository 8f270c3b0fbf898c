#include "batch_prefetch.h"

#include <utility>

namespace zt::apps {

BatchPrefetcher::~BatchPrefetcher() {
  try {  // the copy engine may still read the pinned sources
    if (ahead_) ahead_->landed.synchronize();
    if (taken_) taken_->landed.synchronize();
  } catch (...) {  // a device error is the run's error, reported where it happened
  }
}

BatchPrefetcher::Upload BatchPrefetcher::send_up(BatchKey key) const {
  Upload u{key, gather_(key), {}, {}};
  auto up = [&](Tensor& t) {
    if (!t.defined()) return;
    const Tensor host = t.contiguous();
    Tensor pinned = Tensor::empty_pinned(host.shape(), host.dtype(), MemTag::activation);
    pinned.copy_(host);
    t = Tensor::empty(host.shape(), host.dtype(), MemTag::activation, device_);
    u.landed = upload_on_copy_stream(t, pinned);  // in the copy stream's order: the last covers all
    u.pinned.push_back(std::move(pinned));
  };
  for (Tensor& t : u.batch.inputs) up(t);
  up(u.batch.targets);
  return u;
}

MicroBatch BatchPrefetcher::take(BatchKey key, std::optional<BatchKey> next) {
  std::optional<Upload> now;
  if (ahead_ && ahead_->key == key) {
    now = std::move(ahead_);
    ++hits_;
  } else {
    if (ahead_) ahead_->landed.synchronize();  // its block goes back to the allocator: let it land first
    now = send_up(key);
  }
  ahead_.reset();
  now->landed.make_compute_wait();
  if (taken_) taken_->landed.synchronize();  // landed long ago: its pinned sources can go
  taken_.reset();
  if (next) ahead_ = send_up(*next);  // before this micro-batch's forward is queued, so it overlaps it
  MicroBatch out = std::move(now->batch);
  now->batch = MicroBatch{};
  taken_ = std::move(now);
  return out;
}

}  // namespace zt::apps
