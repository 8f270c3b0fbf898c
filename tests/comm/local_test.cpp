// The local (one-process) backend and the backend-independent parts of the comm layer.
#include <gtest/gtest.h>

#include <cstdlib>

#include "comm_detail.h"
#include "zt/comm/group.h"

namespace zt::comm {
namespace {

TEST(Comm, CollNamesAndTotals) {
  EXPECT_STREQ(coll_name(Coll::all_reduce), "all_reduce");
  EXPECT_STREQ(coll_name(Coll::reduce_scatter), "reduce_scatter");
  EXPECT_STREQ(coll_name(Coll::all_gather), "all_gather");
  EXPECT_STREQ(coll_name(Coll::broadcast), "broadcast");
  EXPECT_STREQ(coll_name(Coll::barrier), "barrier");
  CommStats s;
  EXPECT_EQ(s.total_bytes(), 0u);
  s.bytes = {1, 2, 3, 4, 5};
  EXPECT_EQ(s.total_bytes(), 15u);
}

TEST(Comm, TimeoutMessageWithAndWithoutContext) {
  EXPECT_EQ(detail::timeout_message(Coll::all_gather, 5.0, 1, 2, "step 3, unit 2"),
            "[comm] all_gather timed out after 5.0 s on rank 1 of 2 (step 3, unit 2): a peer stalled or died");
  EXPECT_EQ(detail::timeout_message(Coll::barrier, 0.5, 0, 4, ""),
            "[comm] barrier timed out after 0.5 s on rank 0 of 4: a peer stalled or died");
}

TEST(Comm, LaunchedByMpirunReadsEitherVariable) {
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMIX_RANK");
  EXPECT_FALSE(launched_by_mpirun());
  EXPECT_STREQ(make_group("auto")->backend(), "local");
  setenv("PMIX_RANK", "0", 1);
  EXPECT_TRUE(launched_by_mpirun());
  unsetenv("PMIX_RANK");
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_TRUE(launched_by_mpirun());
  unsetenv("OMPI_COMM_WORLD_SIZE");
}

TEST(Comm, UnknownBackendNamesTheAllowedOnes) {
  try {
    make_group("nccl2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[comm] unknown backend 'nccl2'; allowed: local, mpi, auto");
  }
}

TEST(Comm, OverlapsComparesByteRanges) {
  Tensor flat = Tensor::zeros({12});
  EXPECT_TRUE(detail::overlaps(flat, flat.slice(0, 4, 8)));
  EXPECT_TRUE(detail::overlaps(flat.slice(0, 0, 5), flat.slice(0, 4, 8)));
  EXPECT_FALSE(detail::overlaps(flat.slice(0, 0, 4), flat.slice(0, 4, 8)));
  EXPECT_FALSE(detail::overlaps(flat, Tensor::zeros({12})));
  EXPECT_FALSE(detail::overlaps(flat.slice(0, 4, 4), flat));  // empty never overlaps
}

TEST(CommLocal, RankSizeAndSplit) {
  GroupPtr g = make_group("local");
  EXPECT_EQ(g->rank(), 0);
  EXPECT_EQ(g->size(), 1);
  EXPECT_STREQ(g->backend(), "local");
  g->set_timeout(9.0);
  g->set_context("step 1");
  EXPECT_EQ(g->context(), "step 1");
  g->barrier();
  GroupPtr sub = g->split(5, 3);
  EXPECT_NE(sub.get(), g.get());
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(sub->rank(), 0);
  EXPECT_EQ(sub->timeout(), 9.0);
  EXPECT_EQ(sub->stats().calls[size_t(Coll::barrier)], 0u);  // stats are per group
  g->abort_job(3);  // a no-op for one process
}

TEST(CommLocal, CollectivesCopyAndCountLikeMpi) {
  GroupPtr g = make_group("local");
  Tensor buf = Tensor::from_vector({1, 2, 3}, {3});
  WorkPtr w = g->all_reduce_async(buf, ReduceOp::max);
  EXPECT_TRUE(w->test());
  w->wait();
  EXPECT_EQ(buf.to_vector(), (std::vector<float>{1, 2, 3}));
  Tensor out = Tensor::zeros({3});
  g->reduce_scatter(buf, out);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{1, 2, 3}));
  Tensor gathered = Tensor::zeros({3}, DType::i64), src = Tensor::full({3}, 7.f, DType::i64);
  g->all_gather(src, gathered);
  EXPECT_EQ(gathered.data<int64_t>()[2], 7);
  g->broadcast(buf, 0);
  g->barrier();
  EXPECT_EQ(g->all_reduce_scalar(2.5), 2.5);
  const CommStats& s = g->stats();
  EXPECT_EQ(s.bytes[size_t(Coll::all_reduce)], 2 * 12u + 8u);
  EXPECT_EQ(s.bytes[size_t(Coll::reduce_scatter)], 12u);
  EXPECT_EQ(s.bytes[size_t(Coll::all_gather)], 24u);
  EXPECT_EQ(s.bytes[size_t(Coll::broadcast)], 12u);
  EXPECT_EQ(s.calls[size_t(Coll::all_reduce)], 2u);
  EXPECT_EQ(s.calls[size_t(Coll::barrier)], 1u);
  g->reset_stats();
  EXPECT_EQ(g->stats().total_bytes(), 0u);
}

TEST(CommLocal, AliasedBuffersAreFine) {
  GroupPtr g = make_group("local");
  Tensor t = Tensor::from_vector({4, 5}, {2});
  g->reduce_scatter(t, t);
  g->all_gather(t, t);
  EXPECT_EQ(t.to_vector(), (std::vector<float>{4, 5}));
}

TEST(CommLocal, BadInputIsRejected) {
  GroupPtr g = make_group("local");
  Tensor f = Tensor::zeros({4}), two = Tensor::zeros({2});
  Tensor h = Tensor::zeros({4}, DType::f16);
  try {
    g->all_gather(h, h);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[comm] all_gather: input dtype f16 is not supported; allowed: f32, i32, i64");
  }
  try {
    g->reduce_scatter(f, two);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[comm] reduce_scatter: input has 4 elements, expected group size 1 x output 2 = 2");
  }
  try {
    g->all_gather(two, f);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[comm] all_gather: output has 4 elements, expected group size 1 x input 2 = 2");
  }
  Tensor i = Tensor::zeros({4}, DType::i32);
  EXPECT_THROW(g->reduce_scatter(i, f), Error);  // dtype mismatch
  Tensor strided = Tensor::zeros({3, 2}).transpose(0, 1);
  EXPECT_THROW(g->all_reduce(strided), Error);
  Tensor undefined;
  EXPECT_THROW(g->all_reduce(undefined), Error);
  EXPECT_THROW(g->broadcast(f, 1), Error);
  EXPECT_EQ(g->stats().total_bytes(), 0u);
}

}  // namespace
}  // namespace zt::comm
