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
    EXPECT_EQ(e.kind(), ErrorKind::comm);
    EXPECT_STREQ(e.what(), "[comm] backend 'mpi' is not available in this build");
  }
  EXPECT_FALSE(mpi_available());
  try {
    make_group("shm");
    FAIL() << "shm group created in a build without MPI";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::comm);
    EXPECT_STREQ(e.what(), "[comm] backend 'shm' is not available in this build");
  }
  EXPECT_FALSE(shm_available());
  EXPECT_STREQ(make_group("local")->backend(), "local");
  EXPECT_STREQ(make_fake_group(1, 2)->backend(), "fake");
}

}  // namespace
}  // namespace zt::comm
