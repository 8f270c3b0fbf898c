// The fake backend (Note [fake group]): N ranks in one process, each peer contributing what
// this rank contributes. Sizes 1 and several, every dtype, aliasing, byte counts and numbers.
#include <gtest/gtest.h>

#include <cmath>

#include "comm_detail.h"
#include "zt/comm/group.h"

namespace zt::comm {
namespace {

const DType kAll[] = {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64};

// v * size as the fake group defines it: one fp32 product, rounded once to d.
float times(float v, int size, DType d) {
  const float p = v * float(size);
  if (d == DType::bf16) return bf16_to_float(float_to_bf16(p));
  if (d == DType::f16) return f16_to_float(float_to_f16(p));
  return p;
}

std::vector<float> iota(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = start + float(i % 11) - 3.f;
  return v;
}

TEST(CommFake, RankSizeBackendAndSplit) {
  GroupPtr g = make_fake_group(2, 4);
  EXPECT_EQ(g->rank(), 2);
  EXPECT_EQ(g->size(), 4);
  EXPECT_STREQ(g->backend(), "fake");
  g->set_timeout(5.0);
  g->barrier();
  GroupPtr sub = g->split(7, -1);
  EXPECT_NE(sub.get(), g.get());
  EXPECT_EQ(sub->rank(), 2);
  EXPECT_EQ(sub->size(), 4);
  EXPECT_STREQ(sub->backend(), "fake");
  EXPECT_EQ(sub->timeout(), 5.0);
  EXPECT_EQ(sub->last_seq(), 0u);
  g->abort_job(1);  // a no-op: nothing else to end
}

TEST(CommFake, RankOutsideTheGroupIsRejected) {
  for (auto [rank, size] : {std::pair{0, 0}, {2, 2}, {-1, 3}}) {
    try {
      make_fake_group(rank, size);
      FAIL() << rank << " of " << size;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    }
  }
  try {
    make_fake_group(3, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[comm] fake group: rank 3 of size 2 is not a rank of a non-empty group");
  }
  EXPECT_EQ(make_fake_group(0, 1)->size(), 1);
}

TEST(CommFake, AllReduceSumScalesBySizeWhileAvgAndMaxKeepTheBuffer) {
  for (int size : {1, 3, 4}) {
    GroupPtr g = make_fake_group(size - 1, size);
    for (DType d : kAll) {
      const std::vector<float> v{1.f, -2.5f, 7.f, 1.0078125f, 100.f};
      Tensor ref = Tensor::from_vector(v, {5}, d);  // v as d holds it
      const std::vector<float> held = ref.to_vector();
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        if (op == ReduceOp::avg && !is_floating(d)) continue;
        Tensor buf = ref.clone();
        g->all_reduce(buf, op);
        std::vector<float> got = buf.to_vector();
        for (size_t i = 0; i < v.size(); ++i) {
          const float want = op == ReduceOp::sum ? times(held[i], size, d) : held[i];
          EXPECT_EQ(got[i], want) << "size " << size << " " << dtype_name(d) << " " << reduce_op_name(op) << " " << i;
        }
      }
    }
  }
}

TEST(CommFake, SixteenBitSumRoundsOnceAndOverflowsLikeThePeers) {
  GroupPtr g = make_fake_group(0, 3);
  Tensor b = Tensor::from_vector({1.0078125f}, {1}, DType::bf16);  // 1 + 2^-7: 3x needs 9 bits
  g->all_reduce(b);
  EXPECT_EQ(b.item(), bf16_to_float(float_to_bf16(3.0234375f)));
  EXPECT_NE(b.item(), 3.0234375f);
  Tensor h = Tensor::from_vector({30000.f, -30000.f}, {2}, DType::f16);
  g->all_reduce(h);
  EXPECT_TRUE(std::isinf(h.to_vector()[0]) && h.to_vector()[0] > 0);
  EXPECT_TRUE(std::isinf(h.to_vector()[1]) && h.to_vector()[1] < 0);
  Tensor i = Tensor::from_ints({7, -9}, {2});
  g->all_reduce(i);
  EXPECT_EQ(i.data<int32_t>()[0], 21);
  EXPECT_EQ(i.data<int32_t>()[1], -27);
}

TEST(CommFake, ReduceScatterTakesThisRanksSlice) {
  for (int size : {1, 2, 3}) {
    for (int rank = 0; rank < size; ++rank) {
      GroupPtr g = make_fake_group(rank, size);
      for (DType d : kAll) {
        for (int64_t chunk : {0, 1, 5}) {
          Tensor in = Tensor::from_vector(iota(size * chunk, 10.f), {size * chunk}, d);
          const std::vector<float> held = in.to_vector();
          for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
            if (op == ReduceOp::avg && !is_floating(d)) continue;
            Tensor out = Tensor::full({chunk}, -1.f, d);
            g->reduce_scatter(in, out, op);
            std::vector<float> got = out.to_vector();
            for (int64_t j = 0; j < chunk; ++j) {
              const float mine = held[size_t(rank * chunk + j)];
              ASSERT_EQ(got[size_t(j)], op == ReduceOp::sum ? times(mine, size, d) : mine)
                  << rank << "/" << size << " " << dtype_name(d) << " " << reduce_op_name(op);
            }
          }
        }
      }
    }
  }
}

TEST(CommFake, ReduceScatterIntoOwnSliceOfATwoDimensionalInput) {
  GroupPtr g = make_fake_group(1, 3);
  Tensor flat = Tensor::from_vector(iota(12, 0.f), {3, 4});
  const std::vector<float> before = flat.to_vector();
  Tensor shard = flat.select(0, 1);  // rank 1's slice, a view of the input
  g->reduce_scatter(flat, shard, ReduceOp::sum);
  for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(shard.data<float>()[j], 3.f * before[size_t(4 + j)]);
  EXPECT_EQ(flat.data<float>()[0], before[0]);  // other slices untouched
}

TEST(CommFake, AllGatherRepeatsTheInputInEverySlot) {
  for (int size : {1, 4}) {
    GroupPtr g = make_fake_group(0, size);
    for (DType d : kAll) {
      Tensor in = Tensor::from_vector({3, -1, 8}, {3}, d);
      Tensor out = Tensor::full({size, 3}, -7.f, d);
      g->all_gather(in, out);
      std::vector<float> got = out.to_vector();
      for (int s = 0; s < size; ++s)
        for (int i = 0; i < 3; ++i) ASSERT_EQ(got[size_t(s * 3 + i)], in.to_vector()[size_t(i)]) << dtype_name(d);
    }
  }
}

// The base class's all_to_all (an all_gather, keeping this rank's chunk of each): every peer
// sends what this rank sends, so every chunk of out is in's chunk `rank`.
TEST(CommFake, AllToAllGivesThisRanksChunkFromEveryPeer) {
  GroupPtr g = make_fake_group(1, 3);
  Tensor in = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {6}), out = Tensor::zeros({6});
  g->all_to_all(in, out);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{3, 4, 3, 4, 3, 4}));
  EXPECT_EQ(g->stats().bytes[size_t(Coll::all_to_all)], 24u);
  EXPECT_EQ(g->local_size(), 1);
}

TEST(CommFake, AllGatherFromAnySlotOfTheOutput) {
  const int size = 3;
  for (int rank = 0; rank < size; ++rank) {
    for (int slot = 0; slot < size; ++slot) {  // own slot (ZeRO's shard view) and others
      GroupPtr g = make_fake_group(rank, size);
      Tensor out = Tensor::full({size * 2}, -7.f);
      Tensor in = out.slice(0, slot * 2, slot * 2 + 2);
      in.data<float>()[0] = 4.f;
      in.data<float>()[1] = 5.f;
      g->all_gather(in, out);
      EXPECT_EQ(out.to_vector(), (std::vector<float>{4, 5, 4, 5, 4, 5})) << rank << " " << slot;
    }
  }
}

TEST(CommFake, BroadcastAndBarrierChangeNothing) {
  GroupPtr g = make_fake_group(1, 3);
  Tensor t = Tensor::from_vector({1, 2}, {2}, DType::bf16);
  g->broadcast(t, 2);
  g->broadcast(t, 0);
  EXPECT_EQ(t.to_vector(), (std::vector<float>{1, 2}));
  EXPECT_THROW(g->broadcast(t, 3), Error);
  EXPECT_TRUE(g->barrier_async()->test());
}

TEST(CommFake, ByteCountsAndSequenceNumbersAreThoseOfTheRealBackends) {
  const uint64_t n = 4;
  GroupPtr g = make_fake_group(3, int(n));
  Tensor buf = Tensor::zeros({10}), half = Tensor::zeros({10}, DType::bf16);
  Tensor shard = Tensor::zeros({3}), full = Tensor::zeros({int64_t(3 * n)});
  EXPECT_EQ(g->all_reduce_async(buf)->seq(), 1u);
  EXPECT_EQ(g->reduce_scatter_async(full, shard)->seq(), 2u);
  EXPECT_EQ(g->all_gather_async(shard, full)->seq(), 3u);
  EXPECT_EQ(g->broadcast_async(buf, 1)->seq(), 4u);
  EXPECT_EQ(g->barrier_async()->seq(), 5u);
  g->all_reduce(half, ReduceOp::avg);
  EXPECT_THROW(g->all_gather(full, full), Error);  // rejected: no bytes, no number
  EXPECT_EQ(g->last_seq(), 6u);
  const CommStats& s = g->stats();
  EXPECT_EQ(s.bytes[size_t(Coll::all_reduce)], 80u + 40u);  // twice the buffer; bf16 is 2 bytes
  EXPECT_EQ(s.bytes[size_t(Coll::reduce_scatter)], 12 * n);
  EXPECT_EQ(s.bytes[size_t(Coll::all_gather)], 12 * n);
  EXPECT_EQ(s.bytes[size_t(Coll::broadcast)], 40u);
  EXPECT_EQ(s.bytes[size_t(Coll::barrier)], 0u);
  EXPECT_EQ(s.calls[size_t(Coll::all_reduce)], 2u);
}

// What the fake group is for: the arithmetic of a data-parallel step at N ranks in one process.
// Averaging a padded bucket's gradient over 4 identical ranks leaves each shard unchanged, and
// summing then dividing by N (the engine's current way) gives the same.
TEST(CommFake, AveragedReduceScatterOfIdenticalGradientsIsTheLocalShard) {
  const int n = 4;
  const int64_t numel = 10, padded = 12, chunk = padded / n;  // 2 padding elements
  for (int rank = 0; rank < n; ++rank) {
    GroupPtr g = make_fake_group(rank, n);
    Tensor grad = Tensor::zeros({padded});
    for (int64_t i = 0; i < numel; ++i) grad.data<float>()[i] = 0.1f * float(i + 1);
    Tensor avg = Tensor::empty({chunk}), sum = Tensor::empty({chunk});
    g->reduce_scatter(grad, avg, {ReduceOp::avg, "bucket 0"});
    g->reduce_scatter(grad, sum);
    for (int64_t j = 0; j < chunk; ++j) {
      EXPECT_EQ(avg.data<float>()[j], grad.data<float>()[rank * chunk + j]);
      EXPECT_EQ(sum.data<float>()[j] / float(n), grad.data<float>()[rank * chunk + j]);
    }
  }
}

}  // namespace
}  // namespace zt::comm

namespace zt::comm {
namespace {
// Note [point-to-point]: the backends without messages say so, naming themselves, and count nothing.
TEST(CommFake, PointToPointIsNotAvailableAndSaysSo) {
  GroupPtr g = make_fake_group(0, 3);
  Tensor t = Tensor::zeros({4});
  try {
    g->recv(t, 2);
    FAIL() << "recv on fake should throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::comm);
    EXPECT_STREQ(e.what(),
                 "[comm] recv is not available with backend fake (point-to-point messages need "
                 "run.comm_backend mpi)");
  }
  EXPECT_THROW(g->send(t, 0), Error);  // itself: not a peer
  EXPECT_EQ(g->stats().total_bytes(), 0u);
  EXPECT_EQ(g->last_seq(), 0u);
}
}  // namespace
}  // namespace zt::comm
