#pragma once
// Note [host update overlap]: one host thread that runs ZeRO-Offload's updates in the order they
// are queued, while the caller's thread goes on queuing backward's device work. The caller waits
// for a job by its ticket; a job's exception is rethrown there (and the rest still run). The
// queue is core's (Note [worker queue]), the one the sim device's streams run on.
#include <functional>
#include <utility>

#include "zt/core/worker_queue.h"

namespace zt::zero {

class HostWorker : public WorkerQueue {
 public:
  // `init` runs first on the thread (e.g. binding it to the device whose copies it waits for).
  explicit HostWorker(std::function<void()> init = nullptr) : WorkerQueue(std::move(init)) {}
};

}  // namespace zt::zero
