// Reductions beyond an f32 sum under mpirun (N = 2, 3, 4): avg and max, bf16 and f16 on the
// wire compared with an fp32 reference rounded as the op defines (Note [16-bit reductions]),
// and sequence numbers that every rank agrees on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "mpi_world.h"

namespace zt::comm {
namespace {

using test::world;

const DType kHalf[] = {DType::bf16, DType::f16};

float round_to(DType d, float x) {
  if (d == DType::bf16) return bf16_to_float(float_to_bf16(x));
  if (d == DType::f16) return f16_to_float(float_to_f16(x));
  return x;
}

// Unit roundoff: the largest relative error of one rounding to d.
float unit_roundoff(DType d) { return d == DType::bf16 ? 0x1p-8f : 0x1p-11f; }

// Rank r's value at i, exact in every float dtype; the sum over <= 4 ranks is an integer below
// 256 times a power of two, so every partial sum is exact too, in any reduction order.
float exact_value(int r, int64_t i) {
  return float((r + 1) * (i % 7 + 1) * (i % 3 == 0 ? -1 : 1)) * std::ldexp(1.f, int(i % 5) - 2);
}

// Rank r's value at i: arbitrary bits in [-4, 4) on a 2^-13 grid, rounded to d. Any two such
// values add exactly in fp32, so with two ranks the sum rounds exactly once.
float arbitrary_value(int r, int64_t i, DType d) {
  uint32_t h = uint32_t(i) * 2654435761u ^ uint32_t(r + 1) * 40503u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return round_to(d, float(int32_t(h & 0xffffu) - 32768) * 0x1p-13f);
}

Tensor make(int64_t n, DType d, const std::function<float(int64_t)>& f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = f(i);
  return Tensor::from_vector(v, {n}, d);
}

TEST(CommMpiOps, AllReduceSumAvgMaxOfExactValuesInEveryFloatDtype) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    for (int64_t len : {1, 7, 1003, 65541}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        Tensor t = make(len, d, [&](int64_t i) { return exact_value(r, i); });
        g->all_reduce(t, op);
        std::vector<float> got = t.to_vector();
        for (int64_t i = 0; i < len; ++i) {
          float sum = 0, mx = -INFINITY;
          for (int q = 0; q < n; ++q) sum += exact_value(q, i), mx = std::max(mx, exact_value(q, i));
          const float want = op == ReduceOp::sum ? sum : op == ReduceOp::avg ? round_to(d, sum / float(n)) : mx;
          ASSERT_EQ(got[size_t(i)], want) << dtype_name(d) << " " << reduce_op_name(op) << " len " << len << " i " << i;
        }
      }
    }
  }
}

TEST(CommMpiOps, SixteenBitSumRoundsEachStepInFp32) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  const int64_t len = 4099;
  for (DType d : kHalf) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      Tensor t = make(len, d, [&](int64_t i) { return arbitrary_value(r, i, d); });
      g->all_reduce(t, op);
      std::vector<float> got = t.to_vector();
      int64_t rounded = 0;
      for (int64_t i = 0; i < len; ++i) {
        float exact = 0, mag = 0;  // sums of at most 4 such values are exact in fp32
        for (int q = 0; q < n; ++q) exact += arbitrary_value(q, i, d), mag += std::fabs(arbitrary_value(q, i, d));
        if (round_to(d, exact) != exact) ++rounded;
        if (n == 2) {  // one rounding of the exact sum, then avg's division and one more
          const float sum = round_to(d, exact);
          ASSERT_EQ(got[size_t(i)], op == ReduceOp::sum ? sum : round_to(d, sum / 2.f)) << dtype_name(d) << " " << i;
        } else {  // n - 1 pairwise roundings, in an order MPI chooses
          const float bound = float(n - 1) * unit_roundoff(d) * mag * 1.001f + 1e-7f;
          const float sum = op == ReduceOp::sum ? got[size_t(i)] : got[size_t(i)] * float(n);
          const float slack = op == ReduceOp::sum ? 0.f : unit_roundoff(d) * std::fabs(sum);
          ASSERT_LE(std::fabs(sum - exact), bound + slack) << dtype_name(d) << " " << reduce_op_name(op) << " " << i;
        }
      }
      EXPECT_GT(rounded, len / 4) << "the data must exercise rounding";
    }
  }
}

TEST(CommMpiOps, SixteenBitMaxIsExactAndPropagatesNaN) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  for (DType d : kHalf) {
    Tensor t = make(257, d, [&](int64_t i) { return arbitrary_value(r, i, d); });
    std::vector<float> v = t.to_vector();
    if (r == 0) v[0] = NAN;
    if (r == n - 1) v[1] = NAN;
    t = Tensor::from_vector(v, {257}, d);
    g->all_reduce(t, ReduceOp::max);
    std::vector<float> got = t.to_vector();
    EXPECT_TRUE(std::isnan(got[0])) << dtype_name(d);
    EXPECT_TRUE(std::isnan(got[1])) << dtype_name(d);
    for (int64_t i = 2; i < 257; ++i) {
      float mx = -INFINITY;
      for (int q = 0; q < n; ++q) mx = std::max(mx, arbitrary_value(q, i, d));
      ASSERT_EQ(got[size_t(i)], mx) << dtype_name(d) << " " << i;
    }
  }
}

TEST(CommMpiOps, ReduceScatterWithEveryOpAndDtypeAwkwardChunks) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    for (int64_t chunk : {0, 1, 5, 1001}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        Tensor in = make(n * chunk, d, [&](int64_t j) { return exact_value(r, j); });
        Tensor out = Tensor::full({chunk}, -1.f, d);
        g->reduce_scatter(in, out, op);
        std::vector<float> got = out.to_vector();
        for (int64_t i = 0; i < chunk; ++i) {
          const int64_t j = r * chunk + i;
          float sum = 0, mx = -INFINITY;
          for (int q = 0; q < n; ++q) sum += exact_value(q, j), mx = std::max(mx, exact_value(q, j));
          const float want = op == ReduceOp::sum ? sum : op == ReduceOp::avg ? round_to(d, sum / float(n)) : mx;
          ASSERT_EQ(got[size_t(i)], want) << dtype_name(d) << " " << reduce_op_name(op) << " chunk " << chunk;
        }
      }
    }
  }
}

TEST(CommMpiOps, AveragedReduceScatterIntoOwnSliceOfInput) {
  // The staging path: MPI may not alias, so the result is copied back, then divided.
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  const int64_t chunk = 6;
  for (DType d : {DType::f32, DType::bf16}) {
    Tensor flat = make(n * chunk, d, [&](int64_t j) { return exact_value(r, j); });
    Tensor shard = flat.slice(0, r * chunk, (r + 1) * chunk);
    g->reduce_scatter(flat, shard, ReduceOp::avg);
    std::vector<float> got = shard.to_vector();
    for (int64_t i = 0; i < chunk; ++i) {
      float sum = 0;
      for (int q = 0; q < n; ++q) sum += exact_value(q, r * chunk + i);
      EXPECT_EQ(got[size_t(i)], round_to(d, sum / float(n))) << dtype_name(d) << " " << i;
    }
  }
}

TEST(CommMpiOps, AllGatherAndBroadcastMoveSixteenBitPatternsUnchanged) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  const int64_t chunk = 1001;
  auto bits = [](int q, int64_t i) { return uint16_t((q * 7919 + i * 104729) & 0xffff); };  // NaNs, -0, subnormals
  for (DType d : kHalf) {
    Tensor in = Tensor::empty({chunk}, d), out = Tensor::empty({n * chunk}, d);
    for (int64_t i = 0; i < chunk; ++i) static_cast<uint16_t*>(in.raw_data())[i] = bits(r, i);
    g->all_gather(in, out);
    const auto* o = static_cast<const uint16_t*>(out.raw_data());
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < chunk; ++i) ASSERT_EQ(o[q * chunk + i], bits(q, i)) << dtype_name(d);
    for (int root = 0; root < n; ++root) {
      Tensor b = in.clone();
      g->broadcast(b, root);
      const auto* p = static_cast<const uint16_t*>(b.raw_data());
      for (int64_t i = 0; i < chunk; ++i) ASSERT_EQ(p[i], bits(root, i)) << dtype_name(d) << " root " << root;
    }
  }
}

TEST(CommMpiOps, SequenceNumbersIncreaseInLaunchOrderAndAgreeAcrossRanks) {
  GroupPtr g = make_group(test::backend());  // a fresh group numbers from 1
  const int n = g->size();
  EXPECT_EQ(g->last_seq(), 0u);
  Tensor a = Tensor::zeros({100}), b = Tensor::zeros({100}, DType::bf16);
  WorkPtr w1 = g->all_reduce_async(a, "first");
  WorkPtr w2 = g->all_reduce_async(b, ReduceOp::avg);
  WorkPtr w3 = g->barrier_async();
  w3->wait();
  w1->wait();
  w2->wait();
  EXPECT_EQ(w1->seq(), 1u);
  EXPECT_EQ(w2->seq(), 2u);
  EXPECT_EQ(w3->seq(), 3u);
  g->broadcast(a, n - 1);
  Tensor mine = Tensor::full({1}, 0.f, DType::i64), all = Tensor::zeros({n}, DType::i64);
  mine.data<int64_t>()[0] = int64_t(g->last_seq());
  WorkPtr wg = g->all_gather_async(mine, all);
  wg->wait();
  EXPECT_EQ(wg->seq(), 5u);
  for (int q = 0; q < n; ++q) EXPECT_EQ(all.data<int64_t>()[q], 4) << "rank " << q;
  GroupPtr sub = g->split(0, 0);
  EXPECT_EQ(sub->last_seq(), 0u);
  WorkPtr ws = sub->barrier_async();
  EXPECT_EQ(ws->seq(), 1u);
  ws->wait();
}

}  // namespace
}  // namespace zt::comm

namespace zt::comm {
namespace {

// A gradient norm's squares summed in double, the same bits on every rank, in rank order: rank
// 0's 1 + 2^-40 (no float holds it) then 2^-53 from each other rank, each lost against the sum
// in double (any order adding the small ones first keeps some: 3 x 2^-53 is an ulp and a half).
TEST(CommMpiOps, AllReduceDoubleIsTheRankOrderSumInDoubleOnEveryRank) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  const auto value = [](int k) { return k == 0 ? 1.0 + std::ldexp(1.0, -40) : std::ldexp(1.0, -53); };
  double want = 0;
  for (int k = 0; k < n; ++k) want += value(k);
  EXPECT_EQ(want, 1.0 + std::ldexp(1.0, -40));  // the rank-order sum
  double small_first = 0;
  for (int k = n - 1; k >= 0; --k) small_first += value(k);
  if (n >= 3) {
    EXPECT_NE(small_first, want);  // so the order is what the test sees
  }
  const double got = g->all_reduce_double(value(r), {ReduceOp::sum, "sum of squares"});
  EXPECT_EQ(got, want);
  // Every rank holds the same bits.
  Tensor t = Tensor::from_vector({float(got == want)}, {1});
  g->all_reduce(t, ReduceOp::sum);
  EXPECT_EQ(t.to_vector()[0], float(n));
}

}  // namespace
}  // namespace zt::comm
