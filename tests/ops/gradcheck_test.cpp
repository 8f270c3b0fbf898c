// Central finite differences of every differentiable row of the op table, in f32, on every
// compiled-in backend: the gradient of L = sum(f(x) * R) (R fixed random weights) must match
// (L(x+e) - L(x-e)) / 2e, with e the row's epsilon and inputs moved off the row's kinks.
#include <gtest/gtest.h>

#include <cmath>

#include "op_table.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"

namespace zt::test {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

double weighted_sum(const Tensor& y, const std::vector<float>& r) {
  auto v = y.to_vector();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += double(v[i]) * r[i];
  return s;
}

void gradcheck(const std::vector<Shape>& shapes, const Fn& f, const std::function<float(float)>& off_kink, float eps,
               const std::string& backend) {
  Generator g(42);
  std::vector<Tensor> x;
  for (const auto& s : shapes) {
    std::vector<float> v(static_cast<size_t>(shape_numel(s)));
    for (auto& e : v) e = off_kink ? off_kink(g.normal(0.f, 1.f)) : g.normal(0.f, 1.f);
    x.push_back(on_backend(Tensor::from_vector(v, s), backend));
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

struct Param {
  std::string backend, op;
};
void PrintTo(const Param& p, std::ostream* os) { *os << p.backend << " " << p.op; }

class GradCheck : public ::testing::TestWithParam<Param> {};

TEST_P(GradCheck, AnalyticGradientMatchesFiniteDifferences) {
  const OpRow* row = find_row(GetParam().op);
  ASSERT_NE(row, nullptr);
  for (const auto& gi : row->grad_inputs) {
    SCOPED_TRACE(gi.spec.dump());
    gradcheck(
        gi.shapes, [&](const std::vector<Tensor>& x) { return row->run(x, gi.spec); }, row->off_kink, row->grad_eps,
        GetParam().backend);
  }
}

std::vector<Param> params() {
  std::vector<Param> p;
  for (const auto& b : ops::backends())
    for (const auto& row : op_table())
      if (!row.grad_inputs.empty()) p.push_back({b, row.op});
  return p;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheck, ::testing::ValuesIn(params()),
                         [](const auto& info) { return info.param.backend + "_" + info.param.op; });

// Composite: one input used twice (gradients accumulate) and views feeding a product.
TEST(GradCheckComposite, InputsUsedTwiceAndViewsAccumulate) {
  for (const auto& b : ops::backends()) {
    gradcheck(
        {{3, 4}},
        [](auto& x) {
          return ag::mul(ag::reshape(x[0], {2, 6}), ag::reshape(x[0], {2, 6}));
        },
        {}, 1e-2f, b);
    gradcheck(
        {{3, 4}, {3, 5}}, [](auto& x) { return ag::matmul(ag::transpose(x[0], 0, 1), x[1]); }, {}, 1e-2f, b);
  }
}

}  // namespace
}  // namespace zt::test
