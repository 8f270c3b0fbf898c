// A rank stalls on purpose; the others' wait() must throw ErrorKind::comm naming the collective,
// its sequence number and the label of issue. A side group tells the stalled rank when they
// have failed, which proves they did not wait for it (no wall-clock assertions); it then joins
// so the job ends.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm_detail.h"
#include "mpi_world.h"

namespace zt::comm {
namespace {

using test::world;

// Every rank's last sequence number, gathered: the stalled rank's late collective must carry
// the number the others' timed-out one had.
void expect_same_seq_everywhere(Group& g, uint64_t mine) {
  Tensor in = Tensor::full({1}, 0.f, DType::i64), out = Tensor::zeros({g.size()}, DType::i64);
  in.data<int64_t>()[0] = int64_t(mine);
  g.all_gather(in, out);
  for (int s = 0; s < g.size(); ++s) EXPECT_EQ(out.data<int64_t>()[s], int64_t(mine)) << "rank " << s;
}

TEST(CommMpiTimeout, BlockingAllGatherNamesCollectiveNumberAndLabel) {
  GroupPtr g = world(), side = g->split(0, g->rank());
  const int r = g->rank(), n = g->size(), stalled = 0;
  Tensor in = Tensor::full({3}, float(r)), out = Tensor::zeros({3 * n});
  if (r == stalled) {
    side->barrier();  // released only after every other rank has timed out
    g->all_gather(in, out, "step 3, unit 2");
  } else {
    g->set_timeout(1.0);
    try {
      g->all_gather(in, out, "step 3, unit 2");
      ADD_FAILURE() << "all_gather completed although rank " << stalled << " never joined";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::comm);
      EXPECT_EQ(std::string(e.what()), "[comm] all_gather timed out after 1.0 s on rank " + std::to_string(r) + " of " +
                                           std::to_string(n) + " (#" + std::to_string(g->last_seq()) +
                                           ", step 3, unit 2): a peer stalled or died (the mpi backend cannot "
                                           "tell which)");
    }
    g->set_timeout(120.0);
    side->barrier();
  }
  expect_same_seq_everywhere(*g, g->last_seq());
  g->barrier();  // the abandoned request completes in the background and is reaped
}

TEST(CommMpiTimeout, PerCallTimeoutAndLabelStayWithTheWork) {
  GroupPtr g = world(), side = g->split(0, g->rank());
  const int r = g->rank(), n = g->size(), stalled = n - 1;
  Tensor buf = Tensor::full({5}, float(r + 1));
  if (r == stalled) {
    side->barrier();
    g->all_reduce(buf, {ReduceOp::sum, "step 4"});  // the same collective (Note [collective signatures])
  } else {
    ASSERT_EQ(g->timeout(), 120.0);  // the group's default is long; the call's own is short
    WorkPtr w = g->all_reduce_async(buf, {ReduceOp::sum, "step 4", 1.0});
    g->set_timeout(50.0);     // changes nothing for work already issued
    EXPECT_FALSE(w->test());  // the stalled rank cannot have joined yet
    try {
      w->wait();
      ADD_FAILURE() << "all_reduce completed without rank " << stalled;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::comm);
      EXPECT_EQ(std::string(e.what()), detail::timeout_message(Coll::all_reduce, w->seq(), 1.0, r, n, "step 4",
                                                               "a peer stalled or died (the mpi backend cannot tell "
                                                               "which)"));
    }
    g->set_timeout(120.0);
    side->barrier();
    while (!w->test()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_NO_THROW(w->wait());
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(buf.data<float>()[i], float(n * (n + 1) / 2));
  expect_same_seq_everywhere(*g, g->last_seq());
}

TEST(CommMpiTimeout, ReduceScatterOfABucketNamesStepMicroBatchAndBucket) {
  GroupPtr g = world(), side = g->split(0, g->rank());
  const int r = g->rank(), n = g->size(), stalled = 1;
  Tensor in = Tensor::full({4 * n}, 1.f, DType::bf16), out = Tensor::zeros({4}, DType::bf16);
  const std::string label = "step 3, micro-batch 2, bucket 1";
  if (r == stalled) {
    side->barrier();
    g->reduce_scatter(in, out, {ReduceOp::avg, label});
  } else {
    try {
      g->reduce_scatter(in, out, {ReduceOp::avg, label, 1.0});
      ADD_FAILURE() << "reduce_scatter completed without rank " << stalled;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::comm);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("[comm] reduce_scatter timed out after 1.0 s"), std::string::npos) << msg;
      EXPECT_NE(msg.find("(#" + std::to_string(g->last_seq()) + ", " + label + ")"), std::string::npos) << msg;
    }
    side->barrier();
  }
  g->barrier();
}

TEST(CommMpiTimeout, BarrierWithoutLabel) {
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
      EXPECT_EQ(std::string(e.what()), "[comm] barrier timed out after 0.5 s on rank " + std::to_string(r) + " of " +
                                           std::to_string(n) + " (#" + std::to_string(g->last_seq()) +
                                           "): a peer stalled or died (the mpi backend cannot tell which)");
    }
    g->set_timeout(120.0);
    side->barrier();
  }
}

}  // namespace
}  // namespace zt::comm
