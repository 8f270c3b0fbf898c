// The hierarchical backend (Note [hierarchical groups]) beyond the shared MPI suites, run as
// `mpirun -np 4` with ZT_COMM_NODE_RANKS=2: two "nodes" of two ranks on this machine. Results
// agree bit for bit across ranks, stages of many collectives interleave in any wait order,
// buffers are made and freed in the program's order, split picks by layout, layouts it cannot
// serve are refused (shm) or served by mpi (auto).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "mpi_world.h"

namespace zt::comm {
namespace {

using test::world;

// Every float dtype (integers: the MPI suite) and lengths below L, not divisible by L, over several chunks.
TEST(CommHier, AllReduceEqualsTheSumAtAnyLengthAndIsIdenticalOnEveryRank) {
  GroupPtr g = world();
  ASSERT_STREQ(g->backend(), "shm+mpi");
  const int r = g->rank(), n = g->size();
  for (DType d : {DType::f32, DType::bf16, DType::f16})
    for (int64_t len : {int64_t(1), int64_t(3), int64_t(1001), int64_t(300001)}) {
      std::vector<float> v(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) v[size_t(i)] = float((i * 7 + r * 3) % 11);  // exact in every dtype
      Tensor t = Tensor::from_vector(v, {len}, d);
      g->all_reduce(t);
      Tensor all = Tensor::empty({n * len}, d);
      g->all_gather(t, all);
      const auto* bytes = static_cast<const char*>(all.raw_data());
      const size_t nb = size_t(len) * dtype_size(d);
      for (int q = 1; q < n; ++q) ASSERT_EQ(std::memcmp(bytes, bytes + q * nb, nb), 0) << dtype_name(d) << " " << len;
      Tensor f = t.to(DType::f32);
      for (int64_t i = 0; i < len; i += 97) {
        float expect = 0;
        for (int q = 0; q < n; ++q) expect += float((i * 7 + q * 3) % 11);
        ASSERT_EQ(f.data<float>()[i], expect) << dtype_name(d) << " len " << len << " i " << i;
      }
    }
}

// Reduce-scatters (intra first), all-gathers (inter first) and all-reduces (both) launched
// together and waited newest first: the driver must still launch every lane in call order.
TEST(CommHier, MixedCollectivesWaitedNewestFirst) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  std::vector<Tensor> ins, outs;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 9; ++k) {
    const int64_t len = 1000 * (k + 1) + 1;
    if (k % 3 == 0) {
      ins.push_back(Tensor::full({n * len}, float(r + k)));
      outs.push_back(Tensor::zeros({len}));
      works.push_back(g->reduce_scatter_async(ins.back(), outs.back(), "rs " + std::to_string(k)));
    } else if (k % 3 == 1) {
      ins.push_back(Tensor::full({len}, float(r * 10 + k)));
      outs.push_back(Tensor::zeros({n * len}));
      works.push_back(g->all_gather_async(ins.back(), outs.back(), "ag " + std::to_string(k)));
    } else {
      ins.push_back(Tensor::full({len}, float(r + k)));
      outs.push_back(ins.back());
      works.push_back(g->all_reduce_async(outs.back(), "ar " + std::to_string(k)));
    }
  }
  for (int k = 8; k >= 0; --k) works[size_t(k)]->wait();
  for (int k = 0; k < 9; ++k) {
    const Tensor& o = outs[size_t(k)];
    for (int64_t i = 0; i < o.numel(); i += 333) {
      const float got = o.data<float>()[i];
      if (k % 3 == 1) {
        const int64_t from = i / (o.numel() / n);
        ASSERT_EQ(got, float(from * 10 + k)) << "all_gather " << k << " element " << i;
      } else {
        ASSERT_EQ(got, float(n * (n - 1) / 2 + n * k)) << "collective " << k << " element " << i;
      }
    }
  }
}

// Note [ring staging]: a reduce-scatter's buffers (its own between the stages and the ring's two
// chunk buffers between nodes) are made when it launches, not when the stage between nodes
// starts, and freed when its caller lets go: the allocator sees them in the program's order
// whatever the timing, so a steady training step never grows it.
TEST(CommHier, AReduceScatterAllocatesAtLaunchAndFreesWhenLetGo) {
  GroupPtr g = world();
  const int n = g->size();
  const int64_t len = 4096, nodes = n / g->local_size();
  ASSERT_EQ(nodes, 2);
  g->set_check_collectives(false);  // its signature buffers aside
  const Allocator& a = allocator_for(Device::cpu());
  Tensor in = Tensor::full({n * len}, 1.f), out = Tensor::zeros({len});
  const size_t before = a.stats().of(MemTag::comm), want = size_t(nodes + 2) * len * sizeof(float);
  WorkPtr w = g->reduce_scatter_async(in, out, "staged");
  EXPECT_EQ(a.stats().of(MemTag::comm) - before, want) << "at launch";
  w->wait();
  EXPECT_EQ(a.stats().of(MemTag::comm) - before, want) << "done, not yet let go";
  w.reset();
  EXPECT_EQ(a.stats().of(MemTag::comm), before) << "let go";
  EXPECT_EQ(out.data<float>()[len - 1], float(n));
  g->set_check_collectives(true);
}

TEST(CommHier, BroadcastFromEveryRoot) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  for (int root = 0; root < n; ++root) {
    Tensor t = Tensor::full({5003}, float(r == root ? 100 + root : -1));
    g->broadcast(t, root, "root " + std::to_string(root));
    EXPECT_EQ(t.data<float>()[0], float(100 + root));
    EXPECT_EQ(t.data<float>()[5002], float(100 + root));
  }
  g->barrier();
}

TEST(CommHier, SplitPicksTheBackendByLayout) {
  GroupPtr g = world();
  const int r = g->rank(), n = g->size();
  GroupPtr same_node = g->split(r / 2, r), across = g->split(r % 2, r);
  EXPECT_STREQ(same_node->backend(), "shm");  // ranks 2m, 2m+1: one "node"
  EXPECT_STREQ(across->backend(), "mpi");     // one rank on each node: nothing to share
  EXPECT_EQ(g->local_size(), 2);              // what ZeRO++ splits along
  EXPECT_EQ(same_node->local_size(), 2);
  EXPECT_EQ(across->local_size(), 1);
  EXPECT_EQ(same_node->all_reduce_scalar(double(r)), double(r / 2 * 4 + 1));
  double expect = 0;
  for (int q = r % 2; q < n; q += 2) expect += q;
  EXPECT_EQ(across->all_reduce_scalar(double(r)), expect);
}

TEST(CommHier, UnevenNodesAreRefusedByShmAndServedByMpiUnderAuto) {
  const int n = world()->size();
  ASSERT_EQ(setenv("ZT_COMM_NODE_RANKS", std::to_string(n - 1).c_str(), 1), 0);  // nodes of n-1 and 1
  try {
    make_group("shm");
    ADD_FAILURE() << "shm accepted nodes of " << n - 1 << " and 1 ranks";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::comm);
    EXPECT_NE(std::string(e.what()).find("needs the same number of ranks (more than one) on every node"),
              std::string::npos)
        << e.what();
  }
  GroupPtr a = make_group("auto");
  ASSERT_EQ(setenv("ZT_COMM_NODE_RANKS", "2", 1), 0);
  EXPECT_STREQ(a->backend(), "mpi");
  EXPECT_EQ(a->all_reduce_scalar(1.0), double(n));
}

}  // namespace
}  // namespace zt::comm
