#pragma once
// The world group shared by the tests of one mpirun job (created in mpi_main.cpp), and the
// backend it runs on: "mpi" unless the job was started with `--backend shm`.
#include <string>

#include "zt/comm/group.h"

namespace zt::comm::test {
GroupPtr& world();
const std::string& backend();
}  // namespace zt::comm::test
