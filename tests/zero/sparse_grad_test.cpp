// Run alone or under mpirun -np N: sparse embedding gradients (Note [sparse rows]) give exactly
// the dense reduction at every stage, whichever rows each rank touches, and move fewer bytes.
// The table's gradient rows are sums of small dyadic numbers, exact in any order, so the
// trajectories with sparse gradients on and off must agree bit for bit.
#include <algorithm>

#include "zero_harness.h"
#include "zt/autograd/autograd.h"

using namespace zt;
using namespace zt::testing;

namespace {

constexpr int64_t kRows = 40, kCols = 6, kBatch = 4;

// An "Embedding" (so the engine may make it sparse) computed as one-hot(ids) @ weight; an id of
// -1 selects no row. Like ag::embedding it records the rows it touched when backward reaches it.
class Table : public nn::Module {
 public:
  Table() {
    std::vector<float> w(size_t(kRows * kCols));
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 7) - 3) / 8.f;
    weight = register_parameter("weight", Tensor::from_vector(w, {kRows, kCols}));
  }
  const char* type_name() const override { return "Embedding"; }
  Tensor weight;

 protected:
  Tensor forward(const Tensor& ids) override {
    const int64_t B = ids.numel();
    const Tensor host_ids = ids.to(Device::cpu());  // the engine put them on its device
    std::vector<float> hot(size_t(B * kRows), 0.f);
    std::vector<int32_t> rows;
    for (int64_t i = 0; i < B; ++i)
      if (const int32_t id = host_ids.data<int32_t>()[i]; id >= 0) {
        hot[size_t(i * kRows + id)] = 1.f;
        rows.push_back(id);
      }
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    Tensor w = weight;
    Tensor out = ag::matmul(Tensor::from_vector(hot, {B, kRows}, weight.dtype()).to(weight.device()), weight);
    return autograd::on_backward(out, [w, rows] {
      if (autograd::sparse_grad(w)) autograd::add_touched_rows(w, rows);
    });
  }
};

// ids -> table(ids) + bias: a dense parameter beside the sparse one.
class Model : public nn::Module {
 public:
  Model() {
    table = std::make_shared<Table>();
    register_module("table", table);
    bias = register_parameter("bias", Tensor::zeros({kCols}));
  }
  const char* type_name() const override { return "SparseTestModel"; }
  Tensor bias;

 protected:
  Tensor forward(const Tensor& ids) override { return ag::add((*table)(ids), bias); }

 public:
  std::shared_ptr<Table> table;
};

// Which rows each rank's micro-batch touches.
enum class Touch { some, one_rank_none, all, none };

std::vector<int32_t> ids_for(Touch t, int64_t rank, int64_t N, int64_t step, int64_t micro) {
  std::vector<int32_t> ids(size_t(kBatch), -1);
  for (int64_t i = 0; i < kBatch; ++i) {
    const int64_t k = step * 7 + micro * 3 + i;
    switch (t) {
      case Touch::some:  // row 0 by every rank, others by one rank each
        ids[size_t(i)] = i == 0 ? 0 : int32_t((rank + N * k) % kRows);
        break;
      case Touch::one_rank_none:
        if (rank != N - 1 || N == 1) ids[size_t(i)] = int32_t((rank * 5 + k) % kRows);
        break;
      case Touch::all:
      case Touch::none:
        break;
    }
  }
  if (t == Touch::all) {  // every rank touches every row: a batch of all kRows ids
    ids.resize(size_t(kRows));
    for (int64_t v = 0; v < kRows; ++v) ids[size_t(v)] = int32_t((v + rank + step) % kRows);
  }
  return ids;
}

struct Result {
  std::vector<std::vector<float>> params;
  zero::SparseCommBytes sparse;
  uint64_t comm_bytes = 0;
};

Result run(int stage, DType dt, Touch touch, bool sparse) {
  RunSpec s;
  s.stage = stage;
  s.dtype = dt;
  s.optimizer = "SGD";
  s.clip = 0;
  s.gas = 2;
  zero::EngineOptions o = options(s);
  o.sparse_gradients = sparse;
  auto model = std::make_shared<Model>();
  g_world->reset_stats();
  zero::Engine e(*model, g_world, o);
  const int64_t N = g_world->size(), r = g_world->rank();
  for (int64_t step = 0; step < 3; ++step) {
    for (int64_t m = 0; m < s.gas; ++m) {
      const auto ids = ids_for(touch, r, N, step, m);
      const int64_t B = int64_t(ids.size());
      std::vector<float> w(size_t(B * kCols));
      for (size_t i = 0; i < w.size(); ++i) w[i] = float(int((i + size_t(r) + size_t(m)) % 5) - 2) / 4.f;
      Tensor y = e.forward(Tensor::from_ints(ids, {B}));
      e.backward(ag::sum(ag::mul(y, Tensor::from_vector(w, {B, kCols}, y.dtype()).to(y.device()))));
    }
    e.step(0.5);
  }
  Result out;
  out.sparse = e.sparse_comm_bytes();
  out.comm_bytes = g_world->stats().total_bytes();
  e.for_each_full_param([&](const std::string&, const Tensor& p) { out.params.push_back(p.to_vector()); });
  return out;
}

struct Case {
  int stage;
  DType dtype;
  Touch touch;
};

class SparseGrad : public ::testing::TestWithParam<Case> {};

TEST_P(SparseGrad, EqualsTheDenseReductionExactly) {
  const Case c = GetParam();
  const Result dense = run(c.stage, c.dtype, c.touch, false), sparse = run(c.stage, c.dtype, c.touch, true);
  ASSERT_EQ(sparse.params.size(), dense.params.size());
  for (size_t p = 0; p < dense.params.size(); ++p) EXPECT_EQ(sparse.params[p], dense.params[p]) << "parameter " << p;
  // The table's buffer is the only difference between the runs: its bytes account for the gap.
  EXPECT_EQ(dense.sparse.moved, 0);
  EXPECT_GT(sparse.sparse.dense_equivalent, 0);
  EXPECT_EQ(int64_t(sparse.comm_bytes) - int64_t(dense.comm_bytes),
            sparse.sparse.moved - sparse.sparse.dense_equivalent);
  const int64_t N = g_world->size();
  // Every rank sending every row moves world*V rows instead of V: sparse only pays off below.
  if (c.touch != Touch::all) {
    EXPECT_LT(sparse.sparse.moved, sparse.sparse.dense_equivalent);
  } else if (N > 1) {
    EXPECT_GT(sparse.sparse.moved, sparse.sparse.dense_equivalent);
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  static const char* touch[] = {"some", "one_rank_none", "all", "none"};
  return "stage" + std::to_string(info.param.stage) + "_" + dtype_name(info.param.dtype) + "_" +
         touch[int(info.param.touch)];
}

INSTANTIATE_TEST_SUITE_P(Zero, SparseGrad,
                         ::testing::Values(Case{0, DType::f32, Touch::some}, Case{1, DType::f32, Touch::some},
                                           Case{2, DType::f32, Touch::some}, Case{3, DType::f32, Touch::some},
                                           Case{0, DType::f32, Touch::one_rank_none},
                                           Case{2, DType::f32, Touch::one_rank_none},
                                           Case{3, DType::f32, Touch::one_rank_none}, Case{1, DType::f32, Touch::all},
                                           Case{3, DType::f32, Touch::all}, Case{0, DType::f32, Touch::none},
                                           Case{3, DType::f32, Touch::none}, Case{2, DType::bf16, Touch::some},
                                           Case{3, DType::f16, Touch::one_rank_none}),
                         case_name);

// The engine marks only an untied "Embedding" weight sparse: sparse_gradients off leaves it
// dense, and a weight registered a second time (a tied output projection) is reduced in two parts.
TEST(SparseGradLayout, OnlyUntiedEmbeddingWeightsBecomeSparse) {
  RunSpec s;
  zero::EngineOptions o = options(s);
  o.sparse_gradients = true;
  {
    Model m;
    zero::Engine e(m, g_world, o);
    int sparse = 0;
    for (auto& b : e.plan().buffers) sparse += b.sparse;
    EXPECT_EQ(sparse, 1);
    EXPECT_TRUE(autograd::sparse_grad(m.table->weight));
    EXPECT_FALSE(autograd::sparse_grad(m.bias));
  }
  {
    Model m;  // the engine gives the flag back when it goes
    { zero::Engine e(m, g_world, o); }
    EXPECT_FALSE(autograd::sparse_grad(m.table->weight));
  }
  class Tied : public nn::Module {
   public:
    Tied() {
      table = std::make_shared<Table>();
      register_module("table", table);
      register_module("head", std::make_shared<nn::Linear>(table->weight));
    }
    const char* type_name() const override { return "Tied"; }
    std::shared_ptr<Table> table;

   protected:
    Tensor forward(const Tensor& ids) override { return (*table)(ids); }
  };
  for (int stage : {0, 3}) {  // a tied weight: two parts at stages 0-2 (Note [tied rows]), dense at 3
    o.zero.stage = stage;
    Tied t;
    {
      zero::Engine e(t, g_world, o);
      int tied = 0;
      for (auto& b : e.plan().buffers) {
        EXPECT_FALSE(b.sparse);
        tied += b.tied_rows;
      }
      EXPECT_EQ(tied, stage < 3 ? 1 : 0);
      EXPECT_EQ(autograd::sparse_grad(t.table->weight), stage < 3);  // its rows are recorded
    }
    EXPECT_FALSE(autograd::sparse_grad(t.table->weight));
  }
  o.sparse_gradients = false;
  Model m;
  zero::Engine off(m, g_world, o);
  for (auto& b : off.plan().buffers) EXPECT_FALSE(b.sparse);
}

}  // namespace
