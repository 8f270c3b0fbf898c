// gtest main for multi-rank tests: creates the world group, lets rank 0 print the usual
// report and other ranks only their failures, and fails the job if any rank failed.
#include <gtest/gtest.h>

#include <string>

#include "../common/rank_failures.h"
#include "mpi_world.h"

namespace zt::comm::test {

GroupPtr& world() {
  static GroupPtr g;
  return g;
}

std::string& backend_name() {
  static std::string b = "mpi";
  return b;
}
const std::string& backend() { return backend_name(); }

}  // namespace zt::comm::test

int main(int argc, char** argv) {
  using namespace zt::comm;
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--backend") test::backend_name() = argv[i + 1];
  GroupPtr& g = test::world();
  g = make_group(test::backend());
  g->set_timeout(120.0);  // a failed assertion on one rank must not hang the others forever
  zt::testing::report_by_rank(g->rank());
  int rc = RUN_ALL_TESTS();
  double any_failed = g->all_reduce_scalar(rc != 0 ? 1.0 : 0.0, ReduceOp::max);
  g.reset();
  return any_failed > 0 ? 1 : 0;
}
