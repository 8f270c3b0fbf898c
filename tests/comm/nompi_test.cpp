// Linked against zt_comm_nompi (group.cpp + local.cpp + no_mpi.cpp): an MPI-less build.
#include <gtest/gtest.h>

#include "zt/comm/group.h"

namespace zt::comm {
namespace {

TEST(CommNoMpi, MpiBackendIsNotAvailable) {
  try {
    make_group("mpi");
    FAIL() << "mpi group created in a build without MPI";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[comm] backend 'mpi' is not available in this build");
  }
  EXPECT_STREQ(make_group("local")->backend(), "local");
}

}  // namespace
}  // namespace zt::comm
