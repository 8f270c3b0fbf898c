#pragma once
// Pins a rank's compute threads to cores (hwloc), so ranks sharing a machine do not trade cores
// and each OpenMP thread keeps its caches.
#include <string>
#include <vector>

namespace zt {

struct Pinning {
  std::vector<int> cores;  // OS indices of the cores the threads were pinned to, in thread order
  std::string note;        // what was done, or why nothing was ("3 ranks share 2 cores")
};

// The cores this process may use (its cpuset: a launcher such as mpirun may already have narrowed
// it to this rank's share) are split evenly among the node's local_size ranks unless already
// narrowed; OpenMP thread i of the `threads`-thread team is bound to core i of the share. A lone
// process (local_size 1, not narrowed) with fewer threads than cores is left unpinned.
// Never throws: pinning is an optimisation, so a failure only leaves threads where they are.
Pinning pin_threads(int local_rank, int local_size, int threads);

}  // namespace zt
