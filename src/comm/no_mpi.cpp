// Compiled instead of mpi.cpp when the build has no MPI (ZT_WITH_MPI=OFF or none found): the
// one place that says so.
#include "comm_detail.h"

namespace zt::comm {

bool mpi_available() { return false; }

namespace detail {
GroupPtr make_mpi_group() { ZT_THROW_AS(ErrorKind::comm, "[comm] backend 'mpi' is not available in this build"); }
}  // namespace detail

}  // namespace zt::comm
