// Note [staged chunks] under mpirun (N = 2, 3, 4, mpi and shm): sim tensors staged through the
// host in chunks of a few elements (an uneven last chunk, one element, one chunk for all) give
// what the host group gives for the same values on the host, for every collective and dtype; the
// staged group numbers its own calls and counts the bytes of one call.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "mpi_world.h"

namespace zt::comm {
namespace {

using test::world;

// Rank r's value at i: small integers times powers of two, so sums over <= 4 ranks are exact in
// every float dtype and order (MPI may choose another algorithm for a smaller chunk).
float value(int r, int64_t i) { return float((r + 2) * (i % 11 + 1) * (i % 3 == 0 ? -1 : 1)) * (i % 2 ? 0.5f : 2.f); }

Tensor make(int64_t n, DType d, int r, int64_t shift = 0) {
  std::vector<float> v(size_t(n), 0.f);
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(r, i + shift);
  return Tensor::from_vector(v, {n}, d);
}

// Runs `call` on the host tensors and on sim copies through a group staged in `chunk_bytes`.
void expect_same(int64_t chunk_bytes, const std::string& what, Tensor in, Tensor out,
                 const std::function<void(Group&, Tensor&, Tensor&)>& call) {
  GroupPtr host = world();
  GroupPtr staged = stage_on(host, Device::sim(), chunk_bytes);
  const bool in_place = in.same(out);
  Tensor d_in = in.to(Device::sim()), d_out = in_place ? d_in : out.to(Device::sim());
  call(*host, in, out);
  call(*staged, d_in, d_out);
  EXPECT_EQ(d_out.to(Device::cpu()).to_vector(), out.to_vector())
      << what << ", chunks of " << chunk_bytes << " bytes, N = " << host->size();
}

TEST(CommStaged, ChunkedCollectivesOfSimTensorsEqualTheHostGroups) {
  const int r = world()->rank(), N = world()->size();
  for (DType d : {DType::f32, DType::bf16})
    for (int64_t S : {1, 7, 40})               // elements per rank segment
      for (int64_t elems : {1, 3, 8, 1000}) {  // per chunk: S/elems chunks, the last one shorter
        const int64_t cb = elems * int64_t(dtype_size(d));
        const std::string dt = dtype_name(d), seg = " S=" + std::to_string(S);
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
          Tensor buf = make(S, d, r);
          expect_same(cb, "all_reduce " + dt + seg, buf, buf,
                      [op](Group& g, Tensor& b, Tensor&) { g.all_reduce(b, op); });
          expect_same(cb, "reduce_scatter " + dt + seg, make(N * S, d, r), Tensor::zeros({S}, d),
                      [op](Group& g, Tensor& i, Tensor& o) { g.reduce_scatter(i, o, op); });
        }
        expect_same(cb, "all_gather " + dt + seg, make(S, d, r), Tensor::zeros({N * S}, d),
                    [](Group& g, Tensor& i, Tensor& o) { g.all_gather(i, o); });
        expect_same(cb, "all_to_all " + dt + seg, make(N * S, d, r, 5), Tensor::zeros({N * S}, d),
                    [](Group& g, Tensor& i, Tensor& o) { g.all_to_all(i, o); });
        Tensor b = make(S, d, r, 3);
        expect_same(cb, "broadcast " + dt + seg, b, b, [N](Group& g, Tensor& t, Tensor&) { g.broadcast(t, N - 1); });
      }
}

TEST(CommStaged, ChunksAreOneCallToTheCaller) {
  GroupPtr g = stage_on(world(), Device::sim(), 8);  // two f32 elements a chunk: five host calls
  const int N = g->size();
  Tensor in = make(N * 10, DType::f32, g->rank()).to(Device::sim()),
         out = Tensor::zeros({10}, DType::f32, Device::sim());
  Tensor other = make(3, DType::f32, g->rank()).to(Device::sim());
  const uint64_t host_calls = world()->last_seq();
  WorkPtr first = g->reduce_scatter_async(in, out, CollOptions(ReduceOp::sum, "bucket 3"));
  WorkPtr second = g->all_reduce_async(other);
  WorkPtr third = g->barrier_async();
  EXPECT_EQ(first->seq(), 1u);
  EXPECT_EQ(second->seq(), 2u);
  EXPECT_EQ(third->seq(), 3u);
  EXPECT_EQ(world()->last_seq(), host_calls + 5 + 2 + 1);
  third->wait();
  second->wait();
  first->wait();
  std::vector<float> want(10, 0.f);
  for (int q = 0; q < N; ++q)
    for (int64_t i = 0; i < 10; ++i) want[size_t(i)] += value(q, g->rank() * 10 + i);
  EXPECT_EQ(out.to(Device::cpu()).to_vector(), want);
  EXPECT_EQ(g->stats().calls[size_t(Coll::reduce_scatter)], 1u);
  EXPECT_EQ(g->stats().bytes[size_t(Coll::reduce_scatter)], uint64_t(N * 10 * 4));
}

}  // namespace
}  // namespace zt::comm
