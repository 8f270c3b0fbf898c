#pragma once
// Internal to MPI builds of zt_comm: what the shm and hierarchical backends borrow from mpi.cpp
// (the process-wide MPI runtime, error checks, MPI groups on a given communicator) and what
// the group factories share across those files.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "comm_detail.h"

namespace zt::comm::detail {

void mpi_init();  // MPI_Init_thread once; finalized at exit (Note [finalize only in the normal path])
bool mpi_finalized();
// Throws ErrorKind::comm naming the MPI call and, when given, the collective (`where`).
void check_mpi(int rc, const char* call, const std::string& where = "");
// A collective outside MPI failed, so a peer may be stalled: at exit, call MPI_Finalize only
// if every rank gets there within a few seconds.
void mpi_skip_finalize(const char* why);
GroupPtr make_mpi_group_on(MPI_Comm c);  // takes ownership of c
// Note [ring staging]: an mpi group's reduce_scatter makes two chunk buffers when it launches.
// Inside another backend's collective (hier's stage between nodes) that launch happens whenever
// the earlier stage is seen done, so the caching allocator would see allocations in a
// timing-dependent order (and a steady step could grow it). The caller makes them at its own
// launch instead: `staging` (2 * out.numel() elements of in's dtype) serves the one
// reduce_scatter this call launches on `mpi`.
WorkPtr mpi_reduce_scatter_staged(Group& mpi, const Tensor& in, Tensor& out, const CollOptions& o, Tensor staging);
// shm.cpp: a shm group over c, whose ranks must share one node; takes ownership of c.
GroupPtr make_shm_group_on(MPI_Comm c, size_t slot_bytes);
// hier.cpp (Note [hierarchical groups]): over c, takes ownership. One node: shm (auto: mpi if no
// segment can be made). Several nodes, alike and in consecutive ranks: shm inside each node and
// mpi between them. Else mpi, or for shm_required an ErrorKind::comm naming the layout.
GroupPtr make_node_group_on(MPI_Comm c, bool shm_required, size_t slot_bytes);
// hier.cpp: Group::local_size() of a group over c (collective over c).
int ranks_per_node(MPI_Comm c);

// Note [wait backoff]: OpenMPI progresses only inside MPI calls (shared-memory fragments need
// both sides polling), but ranks may outnumber cores (4 on 2). So: spin on a test briefly,
// then yield the core between tests, and only after a long wait sleep 50..200 us per test.
class Backoff {
 public:
  void pause() {
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
    if (us < kSpinUs) return;
    if (us < kYieldUs) {
      std::this_thread::yield();
      return;
    }
    sleep_us_ = std::min(200, sleep_us_ + 10);
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
  }

 private:
  static constexpr double kSpinUs = 50, kYieldUs = 20000;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int sleep_us_ = 40;
};

}  // namespace zt::comm::detail
