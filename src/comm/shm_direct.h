#pragma once
// Internal to the shm backend: copies that read peers' buffers in place.
// Note [shm single copy]: an all_gather or broadcast larger than one slot skips the staging
// slots. Each rank publishes its buffer's address, one sync point makes them all visible, each
// rank reads its peers' inputs straight into its output with process_vm_readv (one copy, where
// staging makes three), and a last sync point tells every rank that nobody reads its buffer any
// more. Reductions stay staged: measured at N = 2, reading peers in 64 KiB-1 MiB pieces and
// reducing them ran reduce_scatter at 0.5-0.7x and all_reduce at 0.5-0.7x the staged speed
// (the kernel's copy is slower than memcpy, and staging splits the copying between the ranks).
// Chosen when every rank of the group can read every peer (probed at set-up: a container's
// seccomp policy or Yama may forbid it) and ZT_SHM_SINGLE_COPY is not 0.
#include <cstddef>

#include "shm_segment.h"

namespace zt::comm::detail {

// bytes per rank; out holds size() * bytes (in may be out's own slice).
void direct_all_gather(ShmSegment& seg, const char* in, char* out, size_t bytes, const ShmWaitFor& w);
void direct_broadcast(ShmSegment& seg, char* buf, size_t bytes, int root, const ShmWaitFor& w);

}  // namespace zt::comm::detail
