// Point-to-point messages (Note [point-to-point]) under mpirun: order between a pair, dtypes,
// byte counters, numbering apart from the collectives, bad peers; other backends refuse them.
#include <gtest/gtest.h>

#include "mpi_world.h"

namespace zt::comm {
namespace {

using test::world;

TEST(CommP2p, SendAndRecvArriveInOrderAndCountOnEachSide) {
  GroupPtr g = world();
  const int n = g->size(), r = g->rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
  g->reset_stats();
  const uint64_t seq_before = g->last_seq();
  if (std::string(g->backend()) != "mpi") {
    Tensor t = Tensor::zeros({4});
    try {
      g->send(t, next);
      FAIL() << "send on " << g->backend() << " should throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::comm);
      EXPECT_NE(std::string(e.what()).find("send is not available with backend"), std::string::npos) << e.what();
    }
    EXPECT_EQ(g->stats().total_bytes(), 0u);
    return;
  }
  // Two messages each way round the ring: the first of each pair must arrive first.
  Tensor a = Tensor::empty({10}), b = Tensor::empty({3}, DType::bf16);
  for (int64_t i = 0; i < 10; ++i) a.data<float>()[i] = float(100 * r + i);
  for (int64_t i = 0; i < 3; ++i) b.data<bf16>()[i] = float_to_bf16(float(r + i));
  Tensor a_in = Tensor::zeros({10}), b_in = Tensor::zeros({3}, DType::bf16);
  WorkPtr ra = g->recv_async(a_in, prev, "first"), rb = g->recv_async(b_in, prev, "second");
  WorkPtr sa = g->send_async(a, next, "first"), sb = g->send_async(b, next, "second");
  for (WorkPtr w : {ra, rb, sa, sb}) w->wait();
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(a_in.data<float>()[i], float(100 * prev + i));
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(bf16_to_float(b_in.data<bf16>()[i]), float(prev + i));
  EXPECT_EQ(g->stats().bytes[size_t(Coll::send)], 46u);
  EXPECT_EQ(g->stats().bytes[size_t(Coll::recv)], 46u);
  EXPECT_EQ(g->stats().calls[size_t(Coll::send)], 2u);
  EXPECT_EQ(sb->seq() - ra->seq(), 3u);             // numbered among this rank's messages...
  EXPECT_EQ(g->last_seq(), seq_before);             // ...taking no collective's number
  EXPECT_EQ(g->all_reduce_scalar(1.0), double(n));  // collectives stay aligned after them
  g->reset_stats();
}

TEST(CommP2p, ManyToOneLikeAParameterServer) {
  GroupPtr g = world();
  if (std::string(g->backend()) != "mpi") GTEST_SKIP() << "point-to-point is mpi's";
  const int n = g->size();
  Tensor buf = Tensor::empty({1000});
  if (g->rank() == 0) {  // rank 0 sums what every other rank pushes, then sends each the sum back
    double sum = 0;
    for (int q = 1; q < n; ++q) {
      g->recv(buf, q);
      sum += buf.data<float>()[999];
    }
    buf.fill_(float(sum));
    std::vector<WorkPtr> out;
    for (int q = 1; q < n; ++q) out.push_back(g->send_async(buf, q));
    for (auto& w : out) w->wait();
  } else {
    buf.fill_(float(g->rank()));
    g->send(buf, 0);
    g->recv(buf, 0);
  }
  EXPECT_EQ(buf.data<float>()[0], float(n * (n - 1) / 2));
}

TEST(CommP2p, BadPeersAreRejectedBeforeAnythingIsSent) {
  GroupPtr g = world();
  Tensor t = Tensor::zeros({2});
  g->reset_stats();
  for (int peer : {-1, g->rank(), g->size()}) {
    try {
      g->send(t, peer);
      FAIL() << "peer " << peer;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("is not another rank of the group"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(g->stats().calls[size_t(Coll::send)], 0u);
}

}  // namespace
}  // namespace zt::comm
