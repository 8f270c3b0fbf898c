// Multi-rank numerics of every MPI collective (run under mpirun with 2, 3 and 4 ranks):
// rank-dependent data, awkward sizes, aliasing, split, byte counters, dtypes and bad input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>

#include "mpi_world.h"

namespace zt::comm {
namespace {

using test::world;

template <typename T>
Tensor make(int64_t n, DType dt, const std::function<T(int64_t)>& f) {
  Tensor t = Tensor::empty({n}, dt);
  for (int64_t i = 0; i < n; ++i) t.data<T>()[i] = f(i);
  return t;
}

// What a shm or auto group is here: shm+mpi when ZT_COMM_NODE_RANKS splits the job into several
// "nodes" of more than one rank (Note [hierarchical groups]), else shm.
std::string shm_kind(int size) {
  const char* k = std::getenv("ZT_COMM_NODE_RANKS");
  return k && std::atoi(k) > 1 && std::atoi(k) < size ? "shm+mpi" : "shm";
}

TEST(CommMpi, RankAndSizeMatchTheLaunch) {
  GroupPtr g = world();
  ASSERT_NE(std::getenv("OMPI_COMM_WORLD_SIZE"), nullptr);
  EXPECT_EQ(g->size(), std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
  EXPECT_EQ(g->rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  EXPECT_EQ(g->backend(), test::backend() == "mpi" ? "mpi" : shm_kind(g->size()));
  EXPECT_TRUE(launched_by_mpirun());
  EXPECT_TRUE(mpi_available());
  EXPECT_TRUE(shm_available());
  GroupPtr a = make_group("auto");               // collective: every rank duplicates the world
  EXPECT_EQ(a->backend(), shm_kind(g->size()));  // every rank of these jobs is on this one node
  EXPECT_EQ(a->rank(), g->rank());
}

TEST(CommMpi, AllReduceSumF32AwkwardSizes) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  for (int64_t len : {1, 7, 1003, 65541}) {
    Tensor t = make<float>(len, DType::f32, [&](int64_t i) { return float(r + 1 + i % 13); });
    g->all_reduce(t);
    for (int64_t i = 0; i < len; ++i)
      ASSERT_EQ(t.data<float>()[i], float(n * (n + 1) / 2 + n * (i % 13))) << "len " << len << " i " << i;
  }
}

TEST(CommMpi, AllReduceIntegerSumAndMax) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  const int64_t big = int64_t(1) << 40;  // needs 64 bits on the wire
  Tensor s = make<int64_t>(5, DType::i64, [&](int64_t i) { return (r + 1) * big + i; });
  g->all_reduce(s);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(s.data<int64_t>()[i], n * (n + 1) / 2 * big + n * i);
  Tensor m = make<int32_t>(9, DType::i32, [&](int64_t i) { return int32_t((i + r) % n * 100 - 50); });
  g->all_reduce(m, ReduceOp::max);
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(m.data<int32_t>()[i], (n - 1) * 100 - 50);
  Tensor f = make<float>(3, DType::f32, [&](int64_t i) { return -float(r) - float(i); });
  g->all_reduce(f, ReduceOp::max);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(f.data<float>()[i], -float(i));
}

TEST(CommMpi, ReduceScatterSumsEachRanksSlice) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  for (int64_t chunk : {0, 1, 5, 1001}) {
    Tensor in = make<float>(n * chunk, DType::f32, [&](int64_t j) { return float((r + 1) * 1000 + j); });
    Tensor out = Tensor::full({chunk}, -1.f);
    g->reduce_scatter(in, out);
    for (int64_t i = 0; i < chunk; ++i)
      ASSERT_EQ(out.data<float>()[i], float(1000 * n * (n + 1) / 2 + n * (r * chunk + i))) << chunk;
  }
  Tensor in = make<int32_t>(n * 3, DType::i32, [&](int64_t j) { return int32_t(j * (r + 1)); });
  Tensor out = Tensor::empty({3}, DType::i32);
  g->reduce_scatter(in, out);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(out.data<int32_t>()[i], (r * 3 + i) * n * (n + 1) / 2);
}

TEST(CommMpi, ReduceScatterIntoOwnSliceOfInput) {
  // ZeRO reduces a flat gradient bucket into the owner's shard, a view of that same bucket.
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  const int64_t chunk = 6;
  Tensor flat = make<float>(n * chunk, DType::f32, [&](int64_t j) { return float(r * 100 + j); });
  Tensor shard = flat.slice(0, r * chunk, (r + 1) * chunk);
  g->reduce_scatter(flat, shard);
  for (int64_t i = 0; i < chunk; ++i)
    EXPECT_EQ(shard.data<float>()[i], float(100 * n * (n - 1) / 2 + n * (r * chunk + i)));
}

TEST(CommMpi, AllGatherConcatenatesInRankOrder) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  for (int64_t chunk : {0, 1, 3, 1001}) {
    Tensor in = make<float>(chunk, DType::f32, [&](int64_t i) { return float(r * 10000 + i); });
    Tensor out = Tensor::full({n * chunk}, -1.f);
    g->all_gather(in, out);
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < chunk; ++i) ASSERT_EQ(out.data<float>()[s * chunk + i], float(s * 10000 + i));
  }
  Tensor in = make<int64_t>(2, DType::i64, [&](int64_t i) { return (int64_t(r) << 33) + i; });
  Tensor out = Tensor::empty({2 * n}, DType::i64);
  g->all_gather(in, out);
  for (int64_t s = 0; s < n; ++s) EXPECT_EQ(out.data<int64_t>()[2 * s + 1], (s << 33) + 1);
}

TEST(CommMpi, AllGatherWithInputAliasingTheOutput) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  const int64_t chunk = 4;
  // Own slot: the in-place path. Another slot: the input is staged before the gather.
  for (int shift : {0, 1}) {
    Tensor out = Tensor::full({n * chunk}, -7.f);
    int64_t slot = (r + shift) % n;
    Tensor in = out.slice(0, slot * chunk, (slot + 1) * chunk);
    for (int64_t i = 0; i < chunk; ++i) in.data<float>()[i] = float(r * 10 + i);
    g->all_gather(in, out);
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < chunk; ++i)
        ASSERT_EQ(out.data<float>()[s * chunk + i], float(s * 10 + i)) << "shift " << shift;
  }
}

TEST(CommMpi, BroadcastFromEveryRoot) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  for (int root = 0; root < n; ++root) {
    Tensor f = make<float>(17, DType::f32, [&](int64_t i) { return float(r * 100 + i); });
    g->broadcast(f, root);
    for (int64_t i = 0; i < 17; ++i) ASSERT_EQ(f.data<float>()[i], float(root * 100 + i));
    Tensor l = make<int64_t>(1, DType::i64, [&](int64_t) { return (int64_t(r) << 40) + 1; });
    g->broadcast(l, root);
    EXPECT_EQ(l.data<int64_t>()[0], (int64_t(root) << 40) + 1);
  }
}

TEST(CommMpi, SplitEvenAndOddRanks) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  g->set_timeout(77.0);
  GroupPtr sub = g->split(r % 2, -r);  // reversed order inside each color
  g->set_timeout(120.0);
  EXPECT_EQ(sub->timeout(), 77.0);
  int members = 0, before_me = 0;
  for (int q = r % 2; q < n; q += 2) {
    ++members;
    if (q > r) ++before_me;  // higher old rank = lower key = earlier
  }
  EXPECT_EQ(sub->size(), members);
  EXPECT_EQ(sub->rank(), before_me);
  double sum = sub->all_reduce_scalar(double(r));
  double expect = 0;
  for (int q = r % 2; q < n; q += 2) expect += q;
  EXPECT_EQ(sum, expect);
  // Gather old ranks in the new order: descending within the color.
  Tensor in = make<int32_t>(1, DType::i32, [&](int64_t) { return r; });
  Tensor out = Tensor::empty({sub->size()}, DType::i32);
  sub->all_gather(in, out);
  for (int s = 0; s + 1 < sub->size(); ++s) EXPECT_GT(out.data<int32_t>()[s], out.data<int32_t>()[s + 1]);
  EXPECT_EQ(sub->stats().total_bytes(), 8u + 4u * uint64_t(sub->size()));  // not the parent's
  EXPECT_THROW(g->split(-1, 0), Error);                                    // every rank rejects it before calling MPI
}

TEST(CommMpi, ByteCountersFollowTheNote) {
  GroupPtr g = make_group(test::backend());
  const uint64_t n = uint64_t(g->size());
  Tensor buf = Tensor::zeros({10});
  Tensor shard = Tensor::zeros({3}), full = Tensor::zeros({int64_t(3 * n)});
  WorkPtr w = g->all_reduce_async(buf);
  EXPECT_EQ(g->stats().bytes[size_t(Coll::all_reduce)], 80u);  // counted at issue time
  w->wait();
  g->reduce_scatter(full, shard);
  g->all_gather(shard, full);
  g->broadcast(buf, 0);
  g->barrier();
  Tensor spread = Tensor::zeros({int64_t(2 * n)}), got = Tensor::zeros({int64_t(2 * n)});
  g->all_to_all(spread, got);
  const CommStats& s = g->stats();
  EXPECT_EQ(s.bytes[size_t(Coll::reduce_scatter)], 12 * n);
  EXPECT_EQ(s.bytes[size_t(Coll::all_gather)], 12 * n);
  EXPECT_EQ(s.bytes[size_t(Coll::broadcast)], 40u);
  EXPECT_EQ(s.bytes[size_t(Coll::barrier)], 0u);
  EXPECT_EQ(s.bytes[size_t(Coll::all_to_all)], 8 * n);  // its input
  EXPECT_EQ(s.total_bytes(), 80 + 24 * n + 40 + 8 * n);
  for (size_t c = 0; c <= size_t(Coll::all_to_all); ++c) EXPECT_EQ(s.calls[c], 1u) << coll_name(Coll(c));
  EXPECT_EQ(s.calls[size_t(Coll::send)] + s.calls[size_t(Coll::recv)], 0u);
  g->all_reduce_scalar(1.0);
  EXPECT_EQ(g->stats().bytes[size_t(Coll::all_reduce)], 88u);
  g->reset_stats();
  EXPECT_EQ(g->stats().total_bytes(), 0u);
}

// Chunk r of rank q's input lands in chunk q of rank r's output, at every length and dtype the
// quantized gradients use (i32 words) and in f32; mpi sends only the chunks, shm gathers all.
TEST(CommMpi, AllToAllDeliversEachChunkToItsRank) {
  GroupPtr g = make_group(test::backend());
  const int n = g->size(), me = g->rank();
  for (int64_t k : {int64_t(1), int64_t(3), int64_t(1000)}) {
    Tensor in = Tensor::empty({n * k}, DType::i32), out = Tensor::zeros({n * k}, DType::i32);
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < k; ++i) in.data<int32_t>()[r * k + i] = int32_t(1000000 * me + 1000 * r + i % 1000);
    g->all_to_all_async(in, out, "spread")->wait();
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < k; ++i)
        ASSERT_EQ(out.data<int32_t>()[q * k + i], int32_t(1000000 * q + 1000 * me + i % 1000)) << "k " << k;
  }
  Tensor f = Tensor::full({2 * int64_t(n)}, float(me)), fo = Tensor::zeros({2 * int64_t(n)});
  g->all_to_all(f, fo);
  for (int q = 0; q < n; ++q) EXPECT_EQ(fo.data<float>()[2 * q + 1], float(q));
  Tensor odd = Tensor::zeros({int64_t(n) + 1}), odd_out = Tensor::zeros({int64_t(n) + 1});
  if (n > 1) {
    EXPECT_THROW(g->all_to_all(odd, odd_out), Error);  // not a multiple of the size
  }
  EXPECT_THROW(g->all_to_all(f, f), Error);                     // in place
}

// One node here: mpi and shm see every rank on it (hier_test covers two "nodes").
TEST(CommMpi, LocalSizeIsTheRanksOfThisNode) {
  GroupPtr g = make_group(test::backend());
  if (std::getenv("ZT_COMM_NODE_RANKS")) GTEST_SKIP() << "nodes set by the test hook";
  EXPECT_EQ(g->local_size(), g->size());
  GroupPtr half = g->split(g->rank() % 2, g->rank());
  EXPECT_EQ(half->local_size(), half->size());
}

TEST(CommMpi, BadInputThrowsOnEveryRankWithoutHanging) {
  GroupPtr g = make_group(test::backend());
  const int n = g->size();
  Tensor i32 = Tensor::zeros({4}, DType::i32);
  try {
    g->all_reduce(i32, ReduceOp::avg);
    FAIL() << "avg of integers accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_STREQ(e.what(), "[comm] all_reduce: op avg needs a floating dtype (f32, bf16, f16), got i32");
  }
  Tensor in = Tensor::zeros({int64_t(n) * 3 + 1}), out = Tensor::zeros({3});
  EXPECT_THROW(g->reduce_scatter(in, out), Error);
  EXPECT_THROW(g->all_gather(out, in), Error);
  Tensor in_i = Tensor::zeros({int64_t(n) * 3}, DType::i32);
  EXPECT_THROW(g->reduce_scatter(in_i, out), Error);  // dtype mismatch
  Tensor t = Tensor::zeros({2, 3}).transpose(0, 1);
  EXPECT_THROW(g->all_reduce(t), Error);  // not contiguous
  EXPECT_THROW(g->broadcast(out, n), Error);
  EXPECT_THROW(g->broadcast(out, -1), Error);
  EXPECT_EQ(g->stats().total_bytes(), 0u);  // nothing was issued
  EXPECT_EQ(g->last_seq(), 0u);             // nor numbered
  g->barrier();                             // and the group still works
}

TEST(CommMpi, ManyAsyncOpsWaitedInAnyOrder) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  std::vector<Tensor> bufs;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 4; ++k) {
    bufs.push_back(Tensor::full({int64_t(1000 + k)}, float(r + k)));
    works.push_back(g->all_reduce_async(bufs.back()));
  }
  while (!works[0]->test()) {
  }
  for (int k = 3; k >= 0; --k) works[size_t(k)]->wait();
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(bufs[size_t(k)].data<float>()[999], float(n * (n - 1) / 2 + n * k));
    EXPECT_TRUE(works[size_t(k)]->test());
  }
}

TEST(CommMpi, AllReduceScalar) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  EXPECT_EQ(g->all_reduce_scalar(r + 0.5), n * (n - 1) / 2.0 + 0.5 * n);
  EXPECT_EQ(g->all_reduce_scalar(-r, ReduceOp::max), 0.0);
}

}  // namespace
}  // namespace zt::comm
