// The shm backend beyond the shared MPI suites (run under mpirun with 2, 3 and 4 ranks, world
// on shm): results equal, bit for bit, to a reference summed in fp32 in rank order 0..N-1 and
// rounded once, on both sides of the chunk size; progress without the caller; split; auto.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "comm_detail.h"
#include "mpi_world.h"

namespace zt::comm {
namespace {

using test::world;

constexpr size_t kSmallSlot = 4096;  // 1024 f32 per all_reduce chunk: many chunks cheaply

float round_to(DType d, float x) {
  if (d == DType::bf16) return bf16_to_float(float_to_bf16(x));
  if (d == DType::f16) return f16_to_float(float_to_f16(x));
  return x;
}

// Arbitrary bits in [-4, 4), rounded to d: sums round, and their order would show.
float value(int r, int64_t i, DType d) {
  uint32_t h = uint32_t(i) * 2654435761u ^ uint32_t(r + 1) * 40503u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return round_to(d, float(int32_t(h & 0xffffffu) - 8388608) * 0x1p-21f);
}

// What every rank must hold: fp32 in rank order, avg divided in fp32, one rounding.
float reference(ReduceOp op, int n, int64_t i, DType d) {
  float acc = value(0, i, d);
  for (int q = 1; q < n; ++q) acc = op == ReduceOp::max ? std::max(acc, value(q, i, d)) : acc + value(q, i, d);
  return round_to(d, op == ReduceOp::avg ? acc / float(n) : acc);
}

Tensor make(int64_t n, DType d, const std::function<float(int64_t)>& f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = f(i);
  return Tensor::from_vector(v, {n}, d);
}

// Lengths around the chunk of a group: below one chunk, exactly one, one plus a remainder,
// several plus an odd remainder (chunk = slot bytes / element size, for all_reduce).
std::vector<int64_t> lengths_around(size_t slot_bytes, DType d) {
  const int64_t c = int64_t(slot_bytes / dtype_size(d));
  return {1, c / 3 + 5, c, c + 1, 3 * c + 77};
}

const DType kFloat[] = {DType::f32, DType::bf16, DType::f16};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max};

TEST(CommShm, AllReduceEqualsTheRankOrderReferenceOnBothSidesOfTheChunk) {
  for (size_t slot : {kSmallSlot, size_t(1) << 20}) {
    GroupPtr g = detail::make_shm_group(slot);
    const int r = g->rank(), n = g->size();
    for (DType d : kFloat)
      for (int64_t len : lengths_around(slot, d))
        for (ReduceOp op : kOps) {
          if (slot > kSmallSlot && op != ReduceOp::sum) continue;  // the big slot: sums only, for time
          Tensor t = make(len, d, [&](int64_t i) { return value(r, i, d); });
          g->all_reduce(t, op);
          std::vector<float> got = t.to_vector();
          for (int64_t i = 0; i < len; ++i)
            ASSERT_EQ(got[size_t(i)], reference(op, n, i, d))
                << dtype_name(d) << " " << reduce_op_name(op) << " len " << len << " slot " << slot << " i " << i;
        }
  }
}

TEST(CommShm, ReduceScatterEqualsTheReferenceAlsoIntoItsOwnSliceOfTheInput) {
  GroupPtr g = detail::make_shm_group(kSmallSlot);
  const int r = g->rank(), n = g->size();
  for (DType d : kFloat)
    for (int64_t chunk : {int64_t(0), int64_t(3), int64_t(kSmallSlot / dtype_size(d) / size_t(n)), int64_t(2111)})
      for (ReduceOp op : kOps)
        for (bool in_place : {false, true}) {
          Tensor in = make(n * chunk, d, [&](int64_t j) { return value(r, j, d); });
          Tensor out = in_place ? in.slice(0, r * chunk, (r + 1) * chunk) : Tensor::full({chunk}, -1.f, d);
          g->reduce_scatter(in, out, op);
          std::vector<float> got = out.to_vector();
          for (int64_t i = 0; i < chunk; ++i)
            ASSERT_EQ(got[size_t(i)], reference(op, n, r * chunk + i, d))
                << dtype_name(d) << " " << reduce_op_name(op) << " chunk " << chunk << " in place " << in_place;
        }
}

TEST(CommShm, IntegersWrapAndMaxOverSeveralChunks) {
  GroupPtr g = detail::make_shm_group(kSmallSlot);
  const int r = g->rank(), n = g->size();
  const int64_t len = 3000;  // 6 chunks of i32, 12 of i64
  Tensor s = Tensor::empty({len}, DType::i32), m = Tensor::empty({len}, DType::i64);
  for (int64_t i = 0; i < len; ++i) {
    s.data<int32_t>()[i] = int32_t(uint32_t(INT32_MAX) - uint32_t(i) + uint32_t(r));  // sums overflow: wrap
    m.data<int64_t>()[i] = (int64_t(i % n == r) << 40) - i;
  }
  g->all_reduce(s);
  g->all_reduce(m, ReduceOp::max);
  for (int64_t i = 0; i < len; ++i) {
    uint32_t want = 0;
    for (int q = 0; q < n; ++q) want += uint32_t(INT32_MAX) - uint32_t(i) + uint32_t(q);
    ASSERT_EQ(s.data<int32_t>()[i], int32_t(want)) << i;
    ASSERT_EQ(m.data<int64_t>()[i], (int64_t(1) << 40) - i) << i;
  }
}

TEST(CommShm, AllGatherAndBroadcastOverSeveralChunksWithAliasing) {
  GroupPtr g = detail::make_shm_group(kSmallSlot);
  const int r = g->rank(), n = g->size();
  const int64_t chunk = 2500;  // 2.4 slots of f32
  auto v = [](int q, int64_t i) { return float(q * 100000 + i); };
  for (int shift : {-1, 0, 1}) {  // -1: separate buffers; 0: own slot in place; 1: another slot (staged)
    Tensor out = Tensor::full({n * chunk}, -7.f);
    const int64_t s = (r + std::max(shift, 0)) % n;
    Tensor in = shift < 0 ? Tensor::empty({chunk}) : out.slice(0, s * chunk, (s + 1) * chunk);
    for (int64_t i = 0; i < chunk; ++i) in.data<float>()[i] = v(r, i);
    g->all_gather(in, out);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < chunk; ++i) ASSERT_EQ(out.data<float>()[q * chunk + i], v(q, i)) << "shift " << shift;
  }
  for (int root = 0; root < n; ++root) {
    Tensor b = make(5 * chunk + 3, DType::bf16, [&](int64_t i) { return value(r, i, DType::bf16); });
    g->broadcast(b, root);
    std::vector<float> got = b.to_vector();
    for (int64_t i = 0; i < b.numel(); ++i) ASSERT_EQ(got[size_t(i)], value(root, i, DType::bf16)) << root;
  }
}

// Note [shm single copy]: past one slot, all_gather and broadcast read peers in place where the
// machine allows; both paths give the same bytes on both sides of the slot, also in place.
TEST(CommShm, InPlaceReadsAndStagedCopiesGiveTheSameBytes) {
  setenv("ZT_SHM_SINGLE_COPY", "0", 1);  // read when a group is made: every rank, same order
  GroupPtr staged = detail::make_shm_group(kSmallSlot);
  unsetenv("ZT_SHM_SINGLE_COPY");
  GroupPtr direct = detail::make_shm_group(kSmallSlot);
  EXPECT_FALSE(detail::shm_single_copy(*staged));
  std::printf("[rank %d] single copy: %s\n", world()->rank(), detail::shm_single_copy(*direct) ? "on" : "off");
  const int r = direct->rank(), n = direct->size();
  for (int64_t len : lengths_around(kSmallSlot / size_t(n), DType::bf16)) {  // the output straddles the slot
    for (bool in_place : {false, true}) {
      Tensor a = Tensor::full({n * len}, -3.f, DType::bf16), b = a.clone();
      auto input = [&](Tensor& out) {
        Tensor in = in_place ? out.slice(0, r * len, (r + 1) * len) : Tensor::empty({len}, DType::bf16);
        auto* bits = static_cast<uint16_t*>(in.raw_data());
        for (int64_t i = 0; i < len; ++i) bits[i] = uint16_t(r * 7919 + i * 31);
        return in;
      };
      direct->all_gather(input(a), a);
      staged->all_gather(input(b), b);
      ASSERT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "len " << len << " in place " << in_place;
      const auto* got = static_cast<const uint16_t*>(a.raw_data());
      for (int q = 0; q < n; ++q) ASSERT_EQ(got[q * len + len - 1], uint16_t(q * 7919 + (len - 1) * 31)) << q;
    }
    for (int root = 0; root < n; ++root) {
      Tensor a = make(n * len, DType::f32, [&](int64_t i) { return value(r, i, DType::f32); }), b = a.clone();
      direct->broadcast(a, root);
      staged->broadcast(b, root);
      ASSERT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "len " << len << " root " << root;
      ASSERT_EQ(a.data<float>()[n * len - 1], value(root, n * len - 1, DType::f32));
    }
  }
}

TEST(CommShm, SixteenBitResultsAreIdenticalOnEveryRank) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  for (DType d : {DType::bf16, DType::f16}) {
    const int64_t len = 300001;  // more than one default chunk
    Tensor t = make(len, d, [&](int64_t i) { return value(r, i, d); });
    g->all_reduce(t, ReduceOp::avg);
    Tensor all = Tensor::empty({n * len}, d);
    g->all_gather(t, all);
    const auto* bits = static_cast<const uint16_t*>(all.raw_data());
    for (int q = 1; q < n; ++q) ASSERT_EQ(std::memcmp(bits, bits + q * len, size_t(len) * 2), 0) << "rank " << q;
  }
}

TEST(CommShm, CollectivesProgressWhileTheCallerDoesNotCallIntoComm) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  std::vector<Tensor> bufs;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 6; ++k) {
    bufs.push_back(Tensor::full({int64_t(100000 * (k + 1))}, float(r + k)));
    works.push_back(g->all_reduce_async(bufs.back(), "bucket " + std::to_string(k)));
  }
  // test() only reads a flag; the comm thread does the work.
  while (!works.back()->test()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int k = 0; k < 6; ++k) {
    EXPECT_TRUE(works[size_t(k)]->test()) << "launch order: " << k << " ends before the last";
    EXPECT_EQ(bufs[size_t(k)].data<float>()[12345], float(n * (n - 1) / 2 + n * k));
  }
  for (int k = 5; k >= 0; --k) works[size_t(k)]->wait();
  EXPECT_GT(works[5]->busy_seconds(), 0.0);  // started and finished are recorded
  EXPECT_GE(works[5]->blocked_seconds(), 0.0);
  Tensor big = Tensor::full({1 << 20}, 1.f);
  WorkPtr w = g->all_reduce_async(big);
  EXPECT_EQ(w->blocked_seconds(), 0.0);  // not waited for yet
  w->wait();
  EXPECT_GT(w->blocked_seconds(), 0.0);
  EXPECT_EQ(big.data<float>()[777], float(n));
}

TEST(CommShm, SplitMakesShmGroupsThatRunBesideTheParent) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  Tensor pending = Tensor::full({50000}, 1.f);
  WorkPtr w = g->all_reduce_async(pending);  // in flight on the parent while the child is made
  GroupPtr sub = g->split(r % 2, r);
  EXPECT_STREQ(sub->backend(), "shm");
  EXPECT_EQ(sub->size(), (n + 1 - r % 2) / 2);
  double expect = 0;
  for (int q = r % 2; q < n; q += 2) expect += q;
  EXPECT_EQ(sub->all_reduce_scalar(double(r)), expect);
  w->wait();
  EXPECT_EQ(pending.data<float>()[49999], float(n));
}

TEST(CommShm, AutoPicksShmOnOneNode) {
  GroupPtr a = make_group("auto");
  EXPECT_STREQ(a->backend(), "shm");
  EXPECT_EQ(a->rank(), world()->rank());
  EXPECT_EQ(a->all_reduce_scalar(1.0), double(a->size()));
}

TEST(CommShm, AutoFallsBackToMpiWhenNoSegmentCanBeMade) {
  // Two 1 TiB slots per rank: more than /dev/shm holds, so posix_fallocate refuses at once.
  ASSERT_EQ(setenv("ZT_SHM_SLOT_KIB", "1073741824", 1), 0);
  try {
    make_group("shm");
    ADD_FAILURE() << "a shm group of 1 TiB slots was made";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::comm);
    EXPECT_NE(std::string(e.what()).find("[comm] shm: rank 0 could not create the shared segment"), std::string::npos)
        << e.what();
  }
  GroupPtr a = make_group("auto");
  unsetenv("ZT_SHM_SLOT_KIB");
  EXPECT_STREQ(a->backend(), "mpi");
  EXPECT_EQ(a->all_reduce_scalar(1.0), double(a->size()));
}

}  // namespace
}  // namespace zt::comm
