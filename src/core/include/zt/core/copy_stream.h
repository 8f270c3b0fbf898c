#pragma once
// Note [copy stream]: each device (cuda, sim) has a copy stream beside its compute stream (Note
// [device streams]), so that the next batch goes up while the current one computes, and a
// gradient shard comes down while backward goes on, as a PyTorch user's pinned, non_blocking copy
// on a side stream does. Order between the two streams is by events only:
// - a copy waits for the work queued on the compute stream when it is issued: that work may
//   write its source, or have freed its destination block (the caching allocator hands a freed
//   block out at once, safe only in one stream's order), so issue an upload before queuing the
//   work it should overlap, and a download after the work that makes its source;
// - the compute stream waits for an upload's event only where the data is used
//   (CopyEvent::make_compute_wait); the host never waits for it there;
// - the host side must stay alive (and a source unchanged, a destination unread) until the event
//   has happened: pinned memory is read and written by the copy engine later;
//   CopyEvent::synchronize waits for that.
// ZT_SIM_MUTATE=drop_copy_wait (Note [sim device]) drops the compute stream's wait and starts
// each sim upload 100 ms late: the run then computes on a batch that is not there yet.
#include <memory>

#include "zt/core/tensor.h"

namespace zt {

class CopyEvent {
 public:
  CopyEvent() = default;
  CopyEvent(Device device, std::shared_ptr<void> handle) : device_(device), handle_(std::move(handle)) {}
  bool defined() const { return handle_ != nullptr; }
  Device device() const { return device_; }
  void synchronize() const;       // the host waits until the copy has landed (no-op if undefined)
  void make_compute_wait() const;  // later work on the device's compute stream runs after the copy

 private:
  Device device_;
  std::shared_ptr<void> handle_;
};

// A thread of ours that waits for copies (a host worker) makes `d` its current device once, so
// that a CUDA call there never starts another GPU's context (a no-op for the host and sim).
void use_device_on_this_thread(Device d);

// Copies the contiguous tensor `src` into the contiguous tensor `dst` (same dtype and element
// count), one of them on the host and the other on a device, on that device's copy stream;
// returns the event after it. Two host tensors: an ordinary copy and an undefined event.
CopyEvent copy_on_copy_stream(Tensor& dst, const Tensor& src);

}  // namespace zt
