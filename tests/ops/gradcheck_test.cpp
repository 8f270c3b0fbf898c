// Central finite differences (op_table.h's gradcheck) of every differentiable row of the op table,
// in f32, on every compiled-in backend, with the row's epsilon and inputs moved off its kinks.
#include <gtest/gtest.h>

#include <cmath>

#include "op_table.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"

namespace zt::test {
namespace {

struct Param {
  std::string backend, op;
};
void PrintTo(const Param& p, std::ostream* os) { *os << p.backend << " " << p.op; }

class GradCheck : public ::testing::TestWithParam<Param> {};

TEST_P(GradCheck, AnalyticGradientMatchesFiniteDifferences) {
  ZT_SKIP_WITHOUT_DEVICE(GetParam().backend);
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
    if (!backend_present(b)) continue;
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
