#pragma once
// Note [batch prefetch]: on a device, the micro-batch after the one being taken is gathered on the
// host, copied into pinned memory and sent up on the device's copy stream (Note [copy stream])
// before the taken one's forward is queued, so its gather and upload overlap that micro-batch's
// compute; the compute stream waits for a batch only where it is taken. A key that was not
// prefetched (the first, or after a step some rank skipped) is gathered and sent up at once.
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "zt/core/copy_stream.h"
#include "zt/core/tensor.h"

namespace zt::train {

// One micro-batch of a rank: what the model takes and what the loss scores.
struct MicroBatch {
  std::vector<Tensor> inputs;  // what the model takes (images; or ids, attention mask, ...)
  Tensor targets;              // i32: class labels [b], or token targets [b*T] with -100 = not scored
  int64_t samples = 0;
};

struct BatchKey {
  int64_t step = 0, micro = 0;
  friend bool operator==(const BatchKey&, const BatchKey&) = default;
};

class BatchPrefetcher {
 public:
  using Gather = std::function<MicroBatch(BatchKey)>;  // the host micro-batch at a key
  BatchPrefetcher(Device device, Gather gather) : device_(device), gather_(std::move(gather)) {}
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The micro-batch at `key` on the device (inputs and targets), the compute stream ordered after
  // its upload; `next`, when given, is gathered and sent up before this returns. On the cpu: the
  // gathered batch itself (nothing to send ahead).
  MicroBatch take(BatchKey key, std::optional<BatchKey> next);
  int64_t prefetched() const { return hits_; }  // takes served by a prefetch (tests)

 private:
  // A batch sent up: however it ends (taken, replaced, an exception), its copies land before its
  // pinned sources and device blocks go back to the allocators.
  struct Upload {
    BatchKey key;
    MicroBatch batch;            // on the device
    std::vector<Tensor> pinned;  // the sources (empty once moved from)
    CopyEvent landed;            // after the last of its copies
    Upload(BatchKey k, MicroBatch b) : key(k), batch(std::move(b)) {}
    Upload(Upload&&) = default;
    Upload& operator=(Upload&&) = delete;
    ~Upload();
  };
  Upload send_up(BatchKey key) const;

  Device device_;
  Gather gather_;
  std::optional<Upload> ahead_;  // the prefetched micro-batch
  std::optional<Upload> taken_;  // the last one taken, kept for its pinned sources
  int64_t hits_ = 0;
};

}  // namespace zt::train
