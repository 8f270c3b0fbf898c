// The shm backend when a peer stalls or leaves (under mpirun, N = 2 and 3). Each test makes
// its own shm group, since a failure breaks it for good; an MPI side group tells the stalled
// rank when the others have failed, which proves they did not wait for it.
#include <gtest/gtest.h>

#include <functional>

#include "comm_detail.h"
#include "mpi_world.h"

namespace zt::comm {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::comm) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(CommShmTimeout, StalledPeerTimesOutNamingTheCollectiveAndBreaksTheGroup) {
  GroupPtr side = make_group("mpi"), g = detail::make_shm_group(4096);
  const int r = g->rank(), n = g->size(), stalled = 0;
  Tensor in = Tensor::full({3000}, float(r)), out = Tensor::zeros({3000 * n});  // several chunks
  if (r == stalled) {
    side->barrier();  // released only after every other rank has timed out
    const std::string msg = error_of([&] { g->all_gather(in, out, "step 3, unit 2"); });
    EXPECT_NE(msg.find("[comm] all_gather #1 (step 3, unit 2) failed on rank 0 of " + std::to_string(n) + ": rank "),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find(" gave up on the group at #1 after a failure"), std::string::npos) << msg;
  } else {
    g->set_timeout(1.0);
    // The peers' words say who never arrived: "rank 0 did not arrive (stalled or died)".
    EXPECT_EQ(error_of([&] { g->all_gather(in, out, "step 3, unit 2"); }),
              detail::timeout_message(Coll::all_gather, 1, 1.0, r, n, "step 3, unit 2",
                                      "rank " + std::to_string(stalled) + " did not arrive (stalled or died)"));
    side->barrier();
  }
  // Broken: later calls fail at once, naming themselves and the first failure.
  const std::string later = error_of([&] { g->barrier("after"); });
  EXPECT_EQ(later.find("[comm] barrier #2 (after) refused: the shm group broke earlier: [comm] all_gather"), 0u)
      << later;
  side->barrier();  // nobody destroys its group while a peer still looks at it
}

TEST(CommShmTimeout, PerCallTimeoutOfAnAsyncCollective) {
  GroupPtr side = make_group("mpi"), g = detail::make_shm_group();
  const int r = g->rank(), n = g->size(), stalled = n - 1;
  Tensor buf = Tensor::full({5}, float(r + 1));
  if (r != stalled) {
    g->set_timeout(120.0);  // the group's default is long; the call's own is short
    WorkPtr w = g->all_reduce_async(buf, {ReduceOp::sum, "step 4", 1.0});
    g->set_timeout(50.0);     // changes nothing for work already issued
    EXPECT_FALSE(w->test());  // the stalled rank cannot have joined yet
    EXPECT_EQ(error_of([&] { w->wait(); }),
              detail::timeout_message(Coll::all_reduce, w->seq(), 1.0, r, n, "step 4", detail::not_arrived({stalled})));
    EXPECT_THROW(w->test(), Error);  // a failed Work stays failed
  }
  side->barrier();
  if (r == stalled) {
    EXPECT_NE(error_of([&] { g->all_reduce(buf); }).find("gave up on the group at #1"), std::string::npos);
  }
  side->barrier();
}

TEST(CommShmTimeout, APeerThatLeftFailsTheOthersWithoutWaitingForTheTimeout) {
  GroupPtr side = make_group("mpi"), g = detail::make_shm_group();
  const int r = g->rank(), n = g->size(), leaver = n - 1;
  if (r == leaver) {
    g.reset();
    side->barrier();
  } else {
    side->barrier();  // the leaver's group is gone
    g->set_timeout(600.0);
    EXPECT_EQ(error_of([&] { g->barrier("last"); }), "[comm] barrier #1 (last) failed on rank " + std::to_string(r) +
                                                         " of " + std::to_string(n) + ": rank " +
                                                         std::to_string(leaver) + " left the group");
  }
  side->barrier();
}

}  // namespace
}  // namespace zt::comm
