#pragma once
// Internal to MPI builds of zt_comm: what shm.cpp borrows from mpi.cpp (the process-wide MPI
// runtime, error checks, and MPI groups on a given communicator).
#include <mpi.h>

#include <string>

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

}  // namespace zt::comm::detail
