#pragma once
// The world group shared by the tests of one mpirun job (created in mpi_main.cpp).
#include "zt/comm/group.h"

namespace zt::comm::test {
GroupPtr& world();
}
