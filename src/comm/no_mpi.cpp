// Compiled instead of mpi.cpp when CMake finds no MPI: the one place that says so.
#include "comm_detail.h"

namespace zt::comm::detail {

GroupPtr make_mpi_group() { ZT_THROW("[comm] backend 'mpi' is not available in this build"); }
bool mpi_available() { return false; }

}  // namespace zt::comm::detail
