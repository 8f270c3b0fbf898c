#pragma once
// Thread counts and pinning from the cores a rank may use (hwloc), so ranks sharing a machine do
// not trade cores and each OpenMP thread keeps its caches.
#include <string>
#include <vector>

namespace zt {

// Processing units (hardware threads) and the cores that hold them.
struct Cpus {
  int pus = 0, cores = 0;
};
// What the machine allows this process (a container's cpuset, not the host's count) and what this
// thread's mask holds of it (a taskset, or a launcher's binding); mine == machine: nothing narrowed it.
struct CpuView {
  Cpus machine, mine;
};
CpuView cpu_view();  // where hwloc cannot read the topology: hardware_concurrency, as cores too

// Note [default threads]: a rank's threads when run.threads is 0. Where the launcher bound the rank
// itself (rank_bound: OpenMPI says so in OMPI_MCA_orte_bound_at_launch), its share of the machine
// (1/local_size of the units), or fewer if bound to fewer: mpirun binds each of 2 ranks to one core
// unless told otherwise, and more threads there would only take turns; note then says how to widen
// it. Else the process's mask is the whole job's (the machine, or a taskset around mpirun), split
// among the node's local_size ranks. At least 1.
struct ThreadChoice {
  int threads = 1;
  std::string note;
};
ThreadChoice choose_threads(const CpuView& v, bool rank_bound, int local_size);

// Which of its cores a rank pins its threads to: [first, first + count) of the cores in its mask,
// split among the node's ranks unless the launcher bound the rank itself; or why they stay where
// the OS puts them (more ranks or threads than cores; a lone process that leaves cores free, as
// PyTorch; a binding wider than the rank's share, which other ranks may hold too).
struct CoreShare {
  int first = 0, count = 0;
  std::string skip;  // empty: pin thread i to core first + i
};
CoreShare share_cores(const CpuView& v, bool rank_bound, int local_rank, int local_size, int threads);

// This process's place among the node's ranks, as OpenMPI's launcher tells it (a lone process:
// rank 0 of 1): OMPI_COMM_WORLD_LOCAL_RANK and _SIZE, and OMPI_MCA_orte_bound_at_launch, which
// mpirun sets where it bound the process itself.
struct LocalRank {
  int rank = 0, size = 1;
  bool bound = false;
};
LocalRank local_rank_from_env();

struct Pinning {
  std::vector<int> cores;  // OS indices of the cores the threads were pinned to, in thread order
  std::string note;        // what was done, or why nothing was ("3 ranks share 2 cores")
};
// Binds OpenMP thread i of the `threads`-thread team to one hardware thread of core first + i of
// share_cores. Never throws: pinning is an optimisation, so a failure only leaves threads where they are.
Pinning pin_threads(int local_rank, int local_size, int threads, bool rank_bound);

}  // namespace zt
