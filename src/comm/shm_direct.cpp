// Note [shm single copy] in shm_direct.h.
#include "shm_direct.h"

#include <cstring>

namespace zt::comm::detail {

void direct_all_gather(ShmSegment& seg, const char* in, char* out, size_t bytes, const ShmWaitFor& w) {
  const int size = seg.size(), rank = seg.rank();
  seg.publish(in);
  seg.sync(w);  // every input is in place
  char* own = out + size_t(rank) * bytes;
  if (in != own) std::memcpy(own, in, bytes);
  for (int q = 0; q < size; ++q)
    if (q != rank) seg.read_peer(q, seg.published(q), out + size_t(q) * bytes, bytes, w);
  seg.sync(w);  // nobody reads our input any more
}

void direct_broadcast(ShmSegment& seg, char* buf, size_t bytes, int root, const ShmWaitFor& w) {
  seg.publish(buf);
  seg.sync(w);
  if (seg.rank() != root) seg.read_peer(root, seg.published(root), buf, bytes, w);
  seg.sync(w);
}

}  // namespace zt::comm::detail
