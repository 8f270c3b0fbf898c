// Central finite differences of every differentiable function in f32: the analytic gradient
// of L = sum(f(x) * R) (R fixed random weights) must match (L(x+e) - L(x-e)) / 2e.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/core/random.h"

namespace zt {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor randn(const Shape& s, Generator& g, float away_from_zero = 0.f) {
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) {
    x = g.normal(0.f, 1.f);
    if (std::fabs(x) < away_from_zero) x = x < 0 ? x - away_from_zero : x + away_from_zero;  // relu's kink
  }
  return Tensor::from_vector(v, s);
}

double weighted_sum(const Tensor& y, const std::vector<float>& r) {
  auto v = y.to_vector();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += double(v[i]) * r[i];
  return s;
}

void gradcheck(const std::vector<Shape>& shapes, const Fn& f, float away_from_zero = 0.f, float eps = 1e-2f) {
  Generator g(42);
  std::vector<Tensor> x;
  for (const auto& s : shapes) {
    x.push_back(randn(s, g, away_from_zero));
    autograd::set_requires_grad(x.back(), true);
  }
  Tensor y = f(x);
  std::vector<float> r(static_cast<size_t>(y.numel()));
  for (auto& v : r) v = g.uniform(-1.f, 1.f);
  autograd::backward(y, Tensor::from_vector(r, y.shape()));
  for (size_t k = 0; k < x.size(); ++k) {
    const auto analytic = autograd::grad(x[k]).to_vector();
    ASSERT_EQ(int64_t(analytic.size()), x[k].numel());
    float* p = x[k].data<float>();
    for (int64_t i = 0; i < x[k].numel(); ++i) {
      autograd::NoGradGuard ng;
      const float orig = p[i];
      p[i] = orig + eps;
      const double lp = weighted_sum(f(x), r);
      p[i] = orig - eps;
      const double lm = weighted_sum(f(x), r);
      p[i] = orig;
      const double num = (lp - lm) / (2.0 * eps);
      EXPECT_NEAR(analytic[size_t(i)], num, 1e-2 * std::fabs(num) + 2e-3) << "input " << k << " element " << i;
    }
  }
}

TEST(GradCheck, Matmul) {
  gradcheck({{3, 4}, {4, 5}}, [](auto& x) { return ag::matmul(x[0], x[1]); });
  gradcheck({{2, 3, 4}, {2, 4, 2}}, [](auto& x) { return ag::matmul(x[0], x[1]); });
}

TEST(GradCheck, Linear) {
  gradcheck({{4, 5}, {3, 5}, {3}}, [](auto& x) { return ag::linear(x[0], x[1], &x[2]); });
  gradcheck({{2, 3, 5}, {3, 5}}, [](auto& x) { return ag::linear(x[0], x[1], nullptr); });
}

TEST(GradCheck, BroadcastBinary) {
  gradcheck({{3, 4}, {4}}, [](auto& x) { return ag::add(x[0], x[1]); });
  gradcheck({{3, 1}, {1, 4}}, [](auto& x) { return ag::sub(x[0], x[1]); });
  gradcheck({{2, 3, 4}, {3, 1}}, [](auto& x) { return ag::mul(x[0], x[1]); });
  gradcheck({{5}, {5}}, [](auto& x) { return ag::mul(x[0], x[1]); });
}

TEST(GradCheck, Activations) {
  gradcheck({{3, 7}}, [](auto& x) { return ag::scale(x[0], -1.5f); });
  gradcheck({{3, 7}}, [](auto& x) { return ag::relu(x[0]); }, /*away_from_zero=*/0.1f);
  gradcheck({{3, 7}}, [](auto& x) { return ag::gelu(x[0]); });
}

TEST(GradCheck, Reductions) {
  gradcheck({{3, 5}}, [](auto& x) { return ag::sum(x[0]); });
  gradcheck({{3, 5}}, [](auto& x) { return ag::mean(x[0]); });
  gradcheck({{2, 3, 4}}, [](auto& x) { return ag::sum(x[0], 1, false); });
  gradcheck({{2, 3, 4}}, [](auto& x) { return ag::mean(x[0], -1, true); });
}

TEST(GradCheck, Softmax) {
  gradcheck({{3, 6}}, [](auto& x) { return ag::softmax(x[0]); });
  gradcheck({{2, 2, 5}}, [](auto& x) { return ag::log_softmax(x[0]); });
}

TEST(GradCheck, Views) {
  gradcheck({{3, 4}}, [](auto& x) { return ag::mul(ag::reshape(x[0], {2, 6}), ag::reshape(x[0], {2, 6})); });
  gradcheck({{3, 4}, {3, 5}}, [](auto& x) { return ag::matmul(ag::transpose(x[0], 0, 1), x[1]); });
}

TEST(GradCheck, CrossEntropy) {
  Tensor t = Tensor::from_ints({2, -100, 0, 4}, {4});
  gradcheck({{4, 5}}, [t](auto& x) { return ag::cross_entropy(x[0], t); });
  Tensor t2 = Tensor::from_ints({1, 3, 3}, {3});
  gradcheck({{3, 4}}, [t2](auto& x) { return ag::cross_entropy(x[0], t2, /*ignore_index=*/3); });
}

}  // namespace
}  // namespace zt
