// The Llama family's ops beyond the golden and gradient rows of the op table: their identities,
// thread-count independence and one-line errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zt/core/parallel.h"
#include "zt/core/random.h"
#include "zt/ops/transformer.h"

namespace zt::test {
namespace {

Tensor randn(const Shape& s, uint64_t seed, DType dt = DType::f32) {
  Generator g(seed);
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = g.normal(0.f, 1.f);
  return Tensor::from_vector(v, s, dt);
}

template <typename F>
void expect_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Position 0 does not rotate; the inverse undoes the rotation; value heads pass through untouched.
TEST(Rope, PositionZeroIsTheIdentityAndTheInverseUndoesIt) {
  const int64_t H = 4, K = 2, D = 8, T = 6;
  const Tensor qkv = randn({2, T, (H + 2 * K) * D}, 1);
  const ops::RopeTables tab = ops::rope_tables(T, D, 10000.f, Device::cpu());
  const Tensor r = ops::rope(qkv, H, K, tab);
  const std::vector<float> x = qkv.to_vector(), y = r.to_vector(), back = ops::rope(r, H, K, tab, true).to_vector();
  const int64_t W = (H + 2 * K) * D;
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    const int64_t t = (i / W) % T, col = i % W;
    if (t == 0 || col >= (H + K) * D) {
      EXPECT_EQ(y[size_t(i)], x[size_t(i)]) << "t " << t << " col " << col;
    }
    EXPECT_NEAR(back[size_t(i)], x[size_t(i)], 1e-5f) << i;
  }
}

TEST(LlamaOps, ResultsDoNotDependOnTheThreadCount) {
  const Tensor x = randn({300, 96}, 2, DType::bf16), g = randn({96}, 3, DType::bf16), dy = randn({300, 96}, 4, DType::bf16);
  const int saved = num_threads();
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const auto r = ops::rms_norm(x, g, 1e-6f);
    const auto d = ops::rms_norm_backward(dy, x, g, r);
    std::vector<float> all = r.y.to_vector(), dx = d.dx.to_vector(), dg = d.dgamma.to_vector();
    all.insert(all.end(), dx.begin(), dx.end());
    all.insert(all.end(), dg.begin(), dg.end());
    const std::vector<float> s = ops::swiglu_backward(randn({300, 48}, 5, DType::bf16), x).to_vector();
    all.insert(all.end(), s.begin(), s.end());
    outs.push_back(all);
  }
  set_num_threads(saved);
  EXPECT_EQ(outs[1], outs[0]);
  EXPECT_EQ(outs[2], outs[0]);
}

TEST(LlamaOps, BadArgumentsAreOneErrorNamingTheOp) {
  const Tensor x = randn({2, 6}, 6);
  expect_error([&] { ops::rms_norm(x, randn({5}, 7), 1e-6f); }, "[rms_norm] gamma [5] must be [6]");
  expect_error([&] { ops::rms_norm(x, randn({6}, 7), 0.f); }, "[rms_norm] eps must be > 0");
  expect_error([&] { ops::swiglu(randn({2, 5}, 8)); }, "[swiglu] the last dimension holds gate and up");
  const Tensor odd = randn({1, 2, 4 * 3}, 9);  // 2 + 2 x 1 heads of size 3
  expect_error([&] { ops::rope(odd, 2, 1, ops::rope_tables(2, 4, 1e4f, Device::cpu())); }, "head size 3 must be even");
  const Tensor qkv = randn({1, 5, 4 * 4}, 10);
  expect_error([&] { ops::rope(qkv, 2, 1, ops::rope_tables(4, 4, 1e4f, Device::cpu())); }, "[rope] tables must be");
  expect_error([&] { ops::rope(qkv, 3, 2, ops::rope_tables(5, 4, 1e4f, Device::cpu())); },
               "n_kv_head 2 must divide n_head 3");
  expect_error([&] { ops::rope_tables(4, 4, 0.f, Device::cpu()); }, "theta must be > 0");
}

}  // namespace
}  // namespace zt::test
