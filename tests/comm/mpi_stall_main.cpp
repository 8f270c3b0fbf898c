// Rank 1 stalls for good. Rank 0 must fail within its timeout with a clear message and exit
// without MPI_Finalize (which would wait for the stalled peer); mpirun then ends the job.
#include <chrono>
#include <cstdio>
#include <thread>

#include "zt/comm/group.h"

int main() {
  using namespace zt::comm;
  GroupPtr g = make_group("mpi");
  if (g->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(120));
  g->set_timeout(1.0);
  zt::Tensor t = zt::Tensor::zeros({4});
  try {
    g->all_reduce(t, "stall test");
  } catch (const zt::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
