// A rank stalls on purpose; the others' wait() must throw a clear error naming the collective
// and the context of issue. A side group tells the stalled rank when they have failed, which
// proves they did not wait for it (no wall-clock assertions); it then joins so the job ends.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm_detail.h"
#include "mpi_world.h"

namespace zt::comm {
namespace {

using test::world;

TEST(CommMpiTimeout, BlockingAllGatherNamesCollectiveAndContext) {
  GroupPtr g = world(), side = g->split(0, g->rank());
  const int r = g->rank(), n = g->size(), stalled = 0;
  Tensor in = Tensor::full({3}, float(r)), out = Tensor::zeros({3 * n});
  if (r == stalled) {
    side->barrier();  // released only after every other rank has timed out
    g->all_gather(in, out);
  } else {
    g->set_timeout(1.0);
    g->set_context("step 3, unit 2");
    try {
      g->all_gather(in, out);
      ADD_FAILURE() << "all_gather completed although rank " << stalled << " never joined";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "[comm] all_gather timed out after 1.0 s on rank " + std::to_string(r) +
                                           " of " + std::to_string(n) +
                                           " (step 3, unit 2): a peer stalled or died");
    }
    g->set_timeout(120.0);
    g->set_context("");
    side->barrier();
  }
  g->barrier();  // the abandoned request completes in the background and is reaped
}

TEST(CommMpiTimeout, AsyncWorkKeepsIssueContextAndCanBeWaitedAgain) {
  GroupPtr g = world(), side = g->split(0, g->rank());
  const int r = g->rank(), n = g->size(), stalled = n - 1;
  Tensor buf = Tensor::full({5}, float(r + 1));
  if (r == stalled) {
    side->barrier();
    g->all_reduce(buf);
  } else {
    g->set_timeout(1.0);
    g->set_context("step 4");
    WorkPtr w = g->all_reduce_async(buf);
    g->set_timeout(120.0);
    g->set_context("later");
    EXPECT_FALSE(w->test());  // the stalled rank cannot have joined yet
    try {
      w->wait();
      ADD_FAILURE() << "all_reduce completed without rank " << stalled;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), detail::timeout_message(Coll::all_reduce, 1.0, r, n, "step 4"));
    }
    side->barrier();
    while (!w->test()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_NO_THROW(w->wait());
    g->set_context("");
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(buf.data<float>()[i], float(n * (n + 1) / 2));
}

TEST(CommMpiTimeout, BarrierWithoutContext) {
  GroupPtr g = world(), side = g->split(0, g->rank());
  const int r = g->rank(), n = g->size();
  if (r == 0) {
    side->barrier();
    g->barrier();
  } else {
    g->set_timeout(0.5);
    try {
      g->barrier();
      ADD_FAILURE() << "barrier completed without rank 0";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "[comm] barrier timed out after 0.5 s on rank " + std::to_string(r) +
                                           " of " + std::to_string(n) + ": a peer stalled or died");
    }
    g->set_timeout(120.0);
    side->barrier();
  }
}

}  // namespace
}  // namespace zt::comm
