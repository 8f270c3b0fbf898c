// Compiled instead of shm.cpp when the build has no MPI (the shm backend is set up over MPI).
#include "comm_detail.h"

namespace zt::comm {

bool shm_available() { return false; }

namespace detail {
GroupPtr make_shm_group(size_t) { ZT_THROW_AS(ErrorKind::comm, "[comm] backend 'shm' is not available in this build"); }
bool shm_single_copy(const Group&) { return false; }
GroupPtr make_launched_group() { return make_mpi_group(); }  // throws: mpi is not available either
}  // namespace detail

}  // namespace zt::comm
