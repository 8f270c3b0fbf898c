#pragma once
// Note [sim device]: a simulated GPU, `sim:0`, so that CI proves device-correctness without one.
// Its memory is a memfd mapped twice: the pointers its allocator hands out point into a view with
// no access, so host code that dereferences device memory faults at once; kernels and copies work
// through a second, read-write view of the same pages. Its kernels (the CPU's, src/ops/sim) run
// on its own stream, a worker thread that takes work in order, asynchronous to the host: a
// missing synchronisation is a wrong result or a fault, as on a GPU, not a silent pass. Copies to
// or from the host wait for the stream, as cudaMemcpy does. Capacity: ZT_SIM_MEMORY_MB (default
// 8192) of address space, pages taken only when written; the allocator's budget caps it further
// (Allocator::set_budget, as PyTorch's per-process memory fraction). ZT_SIM_MUTATE=drop_sync is
// the mutation the trajectory tests must catch: copies to the host read device memory at once,
// without waiting for the work queued before them, and the stream starts each task 2 ms late.
// ZT_SIM_MUTATE=late keeps every wait and only starts tasks late: a run must still follow the cpu
// run bit for bit (a stress for races between the host and the stream). Uploads may also run on
// a second worker, its copy stream (Note [copy stream]); ZT_SIM_MUTATE=drop_copy_wait drops the
// compute stream's wait for them.
#include <cstddef>
#include <functional>

#include "zt/core/tensor.h"

namespace zt::sim {

// The read-write view of the sim memory at `device_ptr` (a pointer into sim:0's memory);
// throws ErrorKind::internal for a pointer outside it.
void* host_view(const void* device_ptr);
// A cpu tensor over t's bytes through the read-write view: same shape, strides, offset and dtype,
// owning nothing (t's storage must outlive its use). An undefined or released t gives itself.
Tensor host_alias(const Tensor& t);
// Runs `work` on sim:0's stream after everything queued before it. An exception it throws is
// kept and rethrown by the next synchronize() (as a GPU's sticky error).
void enqueue(std::function<void()> work);
// Waits until the stream is idle; rethrows the first error its work threw since the last call.
void synchronize();
// Bytes of the sim memory's address space (ZT_SIM_MEMORY_MB).
size_t capacity();

}  // namespace zt::sim
