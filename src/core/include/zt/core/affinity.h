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

// Note [default threads]: a rank's threads when run.threads is 0: 1/local_size of the processing
// units this process may use (a container's cpuset, not the host's count), at least 1, or fewer
// where a launcher bound the rank to fewer (mpirun binds each of 2 ranks to one core unless told
// otherwise: more threads there would only take turns); note then says so and how to widen it.
struct ThreadChoice {
  int threads = 1;
  std::string note;
};
ThreadChoice default_threads(int local_size);
// The arithmetic of default_threads: bound_pus < 0 where no launcher narrowed the process's cpuset.
ThreadChoice choose_threads(int allowed_pus, int bound_pus, int local_size);

// The arithmetic of pin_threads: the rank's cores [first, first + count) of those it may use
// (bound_cores < 0: not narrowed, `cores` in all), or why its threads stay where the OS puts them.
struct CoreShare {
  int first = 0, count = 0;
  std::string skip;  // empty: pin thread i to core first + i
};
CoreShare share_cores(int cores, int bound_cores, int local_rank, int local_size, int threads);

}  // namespace zt
