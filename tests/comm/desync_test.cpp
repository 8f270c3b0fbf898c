// Note [collective signatures]: ranks whose programs diverge fail at the first collective where
// they differ, every rank with the same line naming both sides, never a hang until the timeout
// and never a silent wrong pairing. The cases are the ones DeepSpeed and FSDP users hit: two
// units of equal size taken in a different order (FSDP's exec-order test), one micro-batch more,
// a skipped step, a rank that evaluates while the others train. Each case runs on a fresh group
// (a failed group stays broken), at N = 2-4, on mpi, shm and the two-level shm+mpi group.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "mpi_world.h"

namespace zt::comm {
namespace {

using test::world;
using testing::HasSubstr;

// Every case has each rank launch as many collectives as the others (balanced): a collective
// that some rank never launches could never complete, and MPI_Finalize would be skipped.

// A fresh group for one case, with a timeout no case may reach (a hang fails the test in time).
GroupPtr fresh() {
  GroupPtr g = world()->split(0, world()->rank());
  g->set_timeout(60.0);
  return g;
}

// Runs `launch` (the works of this rank's program), waits every work, and returns the first
// error ("" when all completed).
std::string first_error(const std::function<std::vector<WorkPtr>()>& launch) {
  std::string first;
  try {
    for (const WorkPtr& w : launch()) {
      try {
        w->wait();
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::comm) << e.what();
        if (first.empty()) first = e.what();
      }
    }
  } catch (const Error& e) {  // a launch refused after the group broke
    if (first.empty()) first = e.what();
  }
  return first;
}

// Every rank reports the same line; on the two-level group the line comes from the lane that saw
// it (its labels name our collective), so there it is matched by its parts.
void expect_mismatch(const std::string& got, const std::string& line) {
  ASSERT_FALSE(got.empty()) << "the ranks' collectives differed, yet every wait completed";
  EXPECT_THAT(got, testing::Not(HasSubstr("timed out"))) << got;
  if (std::string(world()->backend()) == "shm+mpi") {
    EXPECT_THAT(got, HasSubstr("ranks out of step: rank ")) << got;
    return;
  }
  // The first wait's own error, or a later launch refused with it ("... the group broke earlier: ...").
  EXPECT_THAT(got, HasSubstr("[comm] ranks out of step: " + line +
                             " (every rank must launch the same collectives in the same order)"));
}

int last_rank() { return world()->size() - 1; }
std::string rank_str(int r) { return std::to_string(r); }

// Two all-gathers of 4 elements (unit 1 of ones, unit 2 of twos); the last rank launches unit 2
// first. Returns the first error and unit 1's gathered output.
std::pair<std::string, Tensor> gather_units_reordered(Group& g) {
  const bool odd = g.rank() == last_rank();
  Tensor a = Tensor::full({4}, 1.f), b = Tensor::full({4}, 2.f);
  Tensor out_a = Tensor::zeros({4 * g.size()}), out_b = Tensor::zeros({4 * g.size()});
  std::string err = first_error([&] {
    std::vector<WorkPtr> w;
    if (odd) w.push_back(g.all_gather_async(b, out_b, "step 1, unit 2"));
    w.push_back(g.all_gather_async(a, out_a, "step 1, unit 1"));
    if (!odd) w.push_back(g.all_gather_async(b, out_b, "step 1, unit 2"));
    return w;
  });
  return {err, out_a};
}

TEST(CommDesync, EqualSizeUnitsInADifferentOrderNeverPairSilently) {
  GroupPtr g = fresh();
  const std::string err = gather_units_reordered(*g).first;
  expect_mismatch(err, "rank " + rank_str(last_rank()) +
                           " is at all_gather #1 'step 1, unit 2' (f32, 4 elements) while rank 0 is at all_gather "
                           "#1 'step 1, unit 1' (f32, 4 elements)");
  if (std::string(g->backend()) == "shm+mpi") {
    EXPECT_THAT(err, HasSubstr("unit 2"));
  }
}

TEST(CommDesync, OneMicroBatchMoreOnOneRank) {
  GroupPtr g = fresh();
  Tensor grads = Tensor::full({8 * g->size()}, 1.f), shard = Tensor::zeros({8});
  Tensor norm = Tensor::full({1}, 1.f);
  const std::string err = first_error([&] {
    std::vector<WorkPtr> w;
    w.push_back(g->reduce_scatter_async(grads, shard, {ReduceOp::avg, "step 1, micro-batch 1, bucket 0"}));
    if (g->rank() == 1) w.push_back(g->reduce_scatter_async(grads, shard, {ReduceOp::avg, "step 1, micro-batch 2, bucket 0"}));
    w.push_back(g->all_reduce_async(norm, {ReduceOp::sum, "step 1, gradient norm"}));
    if (g->rank() != 1) w.push_back(g->barrier_async("step 2"));  // as many as rank 1 (balanced)
    return w;
  });
  expect_mismatch(err, "rank 1 is at reduce_scatter #2 'step 1, micro-batch 2, bucket 0' (f32, " +
                           std::to_string(8 * g->size()) +
                           " elements, avg) while rank 0 is at all_reduce #2 'step 1, gradient norm' (f32, 1 "
                           "element, sum)");
}

TEST(CommDesync, OneRankSkipsAStep) {
  GroupPtr g = fresh();
  Tensor norm = Tensor::full({1}, 1.f);
  const std::string err = first_error([&] {
    std::vector<WorkPtr> w;
    for (int step = 1, skipped = 0; step <= 3 + skipped; ++step) {
      if (g->rank() == last_rank() && step == 2 && !skipped++) continue;
      w.push_back(g->all_reduce_async(norm, {ReduceOp::sum, "step " + std::to_string(step) + ", gradient norm"}));
    }
    return w;
  });
  expect_mismatch(err, "rank " + rank_str(last_rank()) +
                           " is at all_reduce #2 'step 3, gradient norm' (f32, 1 element, sum) while rank 0 is at "
                           "all_reduce #2 'step 2, gradient norm' (f32, 1 element, sum)");
}

TEST(CommDesync, OneRankEvaluatesWhileTheOthersTrain) {
  GroupPtr g = fresh();
  const bool evaluates = g->rank() == 1;
  Tensor shard = Tensor::full({3}, 1.f, DType::bf16), full = Tensor::zeros({3 * g->size()}, DType::bf16);
  Tensor sum = Tensor::full({1}, 1.f);
  const std::string err = first_error([&] {
    if (evaluates) return std::vector<WorkPtr>{g->all_reduce_async(sum, {ReduceOp::sum, "evaluation, sum 0"})};
    return std::vector<WorkPtr>{g->all_gather_async(shard, full, "step 4, all-gather of unit 0")};
  });
  const std::string eval = "all_reduce #1 'evaluation, sum 0' (f32, 1 element, sum)";
  const std::string train = "all_gather #1 'step 4, all-gather of unit 0' (bf16, 3 elements)";
  expect_mismatch(err, "rank 1 is at " + eval + " while rank 0 is at " + train);
}

// Same kind, size and label: only the dtype, the broadcast's root or the reduction differs.
TEST(CommDesync, DtypeRootAndReductionAreCompared) {
  {
    GroupPtr g = fresh();
    Tensor t = Tensor::full({2}, 1.f, g->rank() == 1 ? DType::f16 : DType::bf16);
    expect_mismatch(first_error([&] { return std::vector<WorkPtr>{g->all_reduce_async(t, {ReduceOp::sum, "x"})}; }),
                    "rank 1 is at all_reduce #1 'x' (f16, 2 elements, sum) while rank 0 is at all_reduce #1 'x' "
                    "(bf16, 2 elements, sum)");
  }
  {
    GroupPtr g = fresh();
    Tensor t = Tensor::full({2}, 1.f);
    const int root = g->rank() == 1 ? 1 : 0;
    expect_mismatch(first_error([&] { return std::vector<WorkPtr>{g->broadcast_async(t, root, "y")}; }),
                    "rank 1 is at broadcast #1 'y' (f32, 2 elements, root 1) while rank 0 is at broadcast #1 'y' "
                    "(f32, 2 elements, root 0)");
  }
  {
    GroupPtr g = fresh();
    Tensor t = Tensor::full({2}, 1.f);
    const ReduceOp op = g->rank() == 1 ? ReduceOp::max : ReduceOp::sum;
    expect_mismatch(first_error([&] { return std::vector<WorkPtr>{g->all_reduce_async(t, {op, "z"})}; }),
                    "rank 1 is at all_reduce #1 'z' (f32, 2 elements, max) while rank 0 is at all_reduce #1 'z' "
                    "(f32, 2 elements, sum)");
  }
}

// Matching collectives run as before, a large staged one included, and the group stays usable.
TEST(CommDesync, MatchingCollectivesPassTheCheck) {
  GroupPtr g = fresh();
  const int n = g->size();
  Tensor big = Tensor::full({int64_t(1) << 20}, float(g->rank() + 1)), out = Tensor::zeros({int64_t(1) << 18});
  Tensor in = Tensor::full({int64_t(n) << 18}, 1.f);
  auto rs = g->reduce_scatter_async(in, out, {ReduceOp::sum, "step 1, bucket 0"});
  auto ar = g->all_reduce_async(big, {ReduceOp::sum, "step 1, gradient norm"});
  ar->wait();  // out of launch order: the earlier one is posted first all the same
  rs->wait();
  EXPECT_EQ(big.data<float>()[12345], float(n * (n + 1) / 2));
  EXPECT_EQ(out.data<float>()[7], float(n));
  g->barrier("end");
}

// Without the check the reordered units of the first case pair silently and swap their data:
// what the check exists to prevent (only where the backend does not itself notice).
TEST(CommDesync, WithoutTheCheckReorderedUnitsPairSilently) {
  GroupPtr g = fresh();
  if (std::string(g->backend()) == "shm+mpi") GTEST_SKIP() << "the two-level group's lanes differ per stage";
  g->set_check_collectives(false);
  const auto [err, out_a] = gather_units_reordered(*g);
  EXPECT_EQ(err, "");
  // Rank 0's "unit 1" got the last rank's unit 2 data.
  if (g->rank() == 0) {
    EXPECT_EQ(out_a.data<float>()[4 * last_rank()], 2.f);
  }
}

}  // namespace
}  // namespace zt::comm
