// Rank 1 stalls for good. Rank 0's collective must fail within its timeout with a clear message,
// and rank 0 must exit without blocking on the peer (no MPI_Finalize, which would wait for it;
// shm's comm thread joined); mpirun then ends the job. usage: test_comm_stall mpi|shm
#include <chrono>
#include <cstdio>
#include <thread>

#include "zt/comm/group.h"

int main(int argc, char** argv) {
  using namespace zt::comm;
  GroupPtr g = make_group(argc > 1 ? argv[1] : "mpi");
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
