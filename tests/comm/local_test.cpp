// The local (one-process) backend and the backend-independent parts of the comm layer.
#include <gtest/gtest.h>

#include <cmath>
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

TEST(Comm, ReduceOpNames) {
  EXPECT_STREQ(reduce_op_name(ReduceOp::sum), "sum");
  EXPECT_STREQ(reduce_op_name(ReduceOp::avg), "avg");
  EXPECT_STREQ(reduce_op_name(ReduceOp::max), "max");
}

TEST(Comm, TimeoutMessageNamesSequenceNumberAndLabel) {
  EXPECT_EQ(detail::timeout_message(Coll::all_gather, 17, 5.0, 1, 2, "step 3, unit 2"),
            "[comm] all_gather timed out after 5.0 s on rank 1 of 2 (#17, step 3, unit 2): a peer stalled or died");
  EXPECT_EQ(detail::timeout_message(Coll::barrier, 4, 0.5, 0, 4, ""),
            "[comm] barrier timed out after 0.5 s on rank 0 of 4 (#4): a peer stalled or died");
  // A backend that knows who is missing names them.
  EXPECT_EQ(detail::timeout_message(Coll::barrier, 4, 0.5, 0, 4, "", detail::not_arrived({3})),
            "[comm] barrier timed out after 0.5 s on rank 0 of 4 (#4): rank 3 did not arrive (stalled or died)");
  EXPECT_EQ(detail::not_arrived({1, 2}), "ranks 1, 2 did not arrive (stalled or died)");
  EXPECT_EQ(detail::not_arrived({}), "");
  EXPECT_EQ(detail::call_name(Coll::reduce_scatter, 9, "step 1"), "reduce_scatter #9 (step 1)");
  EXPECT_EQ(detail::call_name(Coll::broadcast, 1, ""), "broadcast #1");
}

TEST(Comm, AverageDividesInFp32AndRoundsOnce) {
  Tensor f = Tensor::from_vector({1, -7, 10}, {3});
  detail::divide_(f, 3);
  EXPECT_EQ(f.to_vector(), (std::vector<float>{1.f / 3.f, -7.f / 3.f, 10.f / 3.f}));
  const std::vector<float> in{1, -7, 10, 255};
  for (DType d : {DType::bf16, DType::f16}) {
    Tensor t = Tensor::from_vector(in, {4}, d);  // every value exact in both
    detail::divide_(t, 3);
    std::vector<float> got = t.to_vector();
    for (size_t i = 0; i < in.size(); ++i) {
      const float want =
          d == DType::bf16 ? bf16_to_float(float_to_bf16(in[i] / 3.f)) : f16_to_float(float_to_f16(in[i] / 3.f));
      EXPECT_EQ(got[i], want) << dtype_name(d) << " " << in[i];
    }
  }
}

TEST(Comm, MultiplyWrapsIntegersLikeMpiSum) {
  Tensor i = Tensor::from_ints({2147483647, -3}, {2});
  detail::multiply_(i, 2);
  EXPECT_EQ(i.data<int32_t>()[0], -2);
  EXPECT_EQ(i.data<int32_t>()[1], -6);
  Tensor l = Tensor::full({1}, 5.f, DType::i64);
  detail::multiply_(l, 4);
  EXPECT_EQ(l.data<int64_t>()[0], 20);
  Tensor h = Tensor::full({1}, 40000.f, DType::f16);
  detail::multiply_(h, 2);
  EXPECT_TRUE(std::isinf(h.item()));  // past f16's 65504, as a peer's sum would be
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
    EXPECT_STREQ(e.what(), "[comm] unknown backend 'nccl2'; allowed: local, mpi, shm, nccl, auto");
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
  g->barrier("step 1");
  GroupPtr sub = g->split(5, 3);
  EXPECT_NE(sub.get(), g.get());
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(sub->rank(), 0);
  EXPECT_EQ(sub->timeout(), 9.0);
  EXPECT_EQ(sub->stats().calls[size_t(Coll::barrier)], 0u);  // stats are per group
  EXPECT_EQ(sub->last_seq(), 0u);                            // and so are sequence numbers
  EXPECT_EQ(g->last_seq(), 1u);
  g->abort_job(3);  // a no-op for one process
}

TEST(CommLocal, CollectivesCopyAndCountLikeMpi) {
  GroupPtr g = make_group("local");
  Tensor buf = Tensor::from_vector({1, 2, 3}, {3});
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    WorkPtr w = g->all_reduce_async(buf, op);
    EXPECT_TRUE(w->test());
    w->wait();
    EXPECT_EQ(buf.to_vector(), (std::vector<float>{1, 2, 3})) << reduce_op_name(op);
  }
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
  EXPECT_EQ(s.bytes[size_t(Coll::all_reduce)], 3 * 2 * 12u + 8u);
  EXPECT_EQ(s.bytes[size_t(Coll::reduce_scatter)], 12u);
  EXPECT_EQ(s.bytes[size_t(Coll::all_gather)], 24u);
  EXPECT_EQ(s.bytes[size_t(Coll::broadcast)], 12u);
  EXPECT_EQ(s.calls[size_t(Coll::all_reduce)], 4u);
  EXPECT_EQ(s.calls[size_t(Coll::barrier)], 1u);
  g->reset_stats();
  EXPECT_EQ(g->stats().total_bytes(), 0u);
}

// Note [staged group]: one process needs no trip through the host for a device's tensors: its
// group on the device is a local one, whose scatter and gather are the device's own copies.
TEST(CommLocal, OnADeviceItIsALocalGroupThereWithoutStaging) {
  GroupPtr host = make_group("local");
  EXPECT_FALSE(stages_through_host(*host, Device::sim()));
  GroupPtr g = stage_on(host, Device::sim());
  EXPECT_STREQ(g->backend(), "local");
  EXPECT_EQ(g->device(), Device::sim());
  EXPECT_EQ(g->split(0, 0)->device(), Device::sim());
  const Tensor src = Tensor::from_vector({1, 2, 3, 4}, {4}, DType::bf16).to(Device::sim());
  Tensor gathered = Tensor::zeros({4}, DType::bf16, Device::sim()), scattered = Tensor::zeros({2, 2}, DType::bf16, Device::sim());
  g->all_gather(src, gathered);
  g->reduce_scatter(src, scattered);
  EXPECT_EQ(gathered.to_vector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(scattered.to_vector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_THROW(g->all_gather(Tensor::zeros({4}, DType::bf16), gathered), Error);  // a host tensor is not the group's
}

TEST(CommLocal, SixteenBitBuffersPassUnchanged) {
  GroupPtr g = make_group("local");
  for (DType d : {DType::bf16, DType::f16}) {
    Tensor buf = Tensor::from_vector({1.5f, -0.3f, 65504.f}, {3}, d);
    const std::vector<float> want = buf.to_vector();  // the values rounded to d
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      g->all_reduce(buf, op);
      EXPECT_EQ(buf.to_vector(), want) << dtype_name(d) << " " << reduce_op_name(op);
      Tensor out = Tensor::zeros({3}, d);
      g->reduce_scatter(buf, out, op);
      EXPECT_EQ(out.to_vector(), want);
    }
    Tensor gathered = Tensor::zeros({3}, d);
    g->all_gather(buf, gathered);
    EXPECT_EQ(gathered.to_vector(), want);
    g->broadcast(buf, 0);
    EXPECT_EQ(buf.to_vector(), want);
  }
}

TEST(CommLocal, SequenceNumbersCountLaunchedCollectives) {
  GroupPtr g = make_group("local");
  EXPECT_EQ(g->last_seq(), 0u);
  Tensor t = Tensor::zeros({4});
  EXPECT_EQ(g->all_reduce_async(t)->seq(), 1u);
  EXPECT_EQ(g->barrier_async()->seq(), 2u);
  EXPECT_EQ(g->broadcast_async(t, 0)->seq(), 3u);
  g->all_reduce_scalar(1.0);                // one all_reduce: #4
  EXPECT_THROW(g->broadcast(t, 1), Error);  // rejected: takes no number
  EXPECT_EQ(g->all_gather_async(t, t)->seq(), 5u);
  EXPECT_EQ(g->reduce_scatter_async(t, t)->seq(), 6u);
  EXPECT_EQ(g->last_seq(), 6u);
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
  Tensor i = Tensor::zeros({4}, DType::i32);
  try {
    g->all_reduce(i, ReduceOp::avg);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_STREQ(e.what(), "[comm] all_reduce: op avg needs a floating dtype (f32, bf16, f16), got i32");
  }
  EXPECT_THROW(g->reduce_scatter(i, i, ReduceOp::avg), Error);
  try {
    CollOptions o;
    o.timeout_s = -1;
    g->barrier(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_STREQ(e.what(), "[comm] barrier: timeout_s must be >= 0 (0 = the group's 300 s), got -1");
  }
  EXPECT_THROW(g->set_timeout(0), Error);
  EXPECT_EQ(g->timeout(), 300.0);
  try {
    g->reduce_scatter(f, two);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_STREQ(e.what(), "[comm] reduce_scatter: input has 4 elements, expected group size 1 x output 2 = 2");
  }
  try {
    g->all_gather(two, f);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[comm] all_gather: output has 4 elements, expected group size 1 x input 2 = 2");
  }
  EXPECT_THROW(g->reduce_scatter(i, f), Error);  // dtype mismatch
  Tensor strided = Tensor::zeros({3, 2}).transpose(0, 1);
  EXPECT_THROW(g->all_reduce(strided), Error);
  Tensor undefined;
  EXPECT_THROW(g->all_reduce(undefined), Error);
  EXPECT_THROW(g->broadcast(f, 1), Error);
  EXPECT_EQ(g->stats().total_bytes(), 0u);
  EXPECT_EQ(g->last_seq(), 0u);
  g->all_reduce(i, ReduceOp::max);  // integers take sum and max
  EXPECT_EQ(g->last_seq(), 1u);
}

}  // namespace
}  // namespace zt::comm
