#pragma once
// Internal to zt_comm: backend factories (one of mpi.cpp / no_mpi.cpp is compiled) and the
// argument checks every backend shares, so local and MPI reject the same inputs alike.
#include <string>

#include "zt/comm/group.h"

namespace zt::comm::detail {

GroupPtr make_local_group();
GroupPtr make_mpi_group();  // throws in a build without MPI
bool mpi_available();

// Contiguous, has storage, and a dtype the wire supports (f32, i32, i64).
void check_buffer(Coll c, const Tensor& t, const char* what);
void check_reduce_scatter(int size, const Tensor& in, const Tensor& out);
void check_all_gather(int size, const Tensor& in, const Tensor& out);
void check_root(int size, int root);
// True when the byte ranges of a and b intersect (both contiguous).
bool overlaps(const Tensor& a, const Tensor& b);

// "[comm] all_gather timed out after 5.0 s on rank 1 of 2 (step 3): a peer stalled or died"
std::string timeout_message(Coll c, double seconds, int rank, int size, const std::string& context);

}  // namespace zt::comm::detail
