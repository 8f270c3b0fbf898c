// Every fixture case (tests/golden/gen_golden*.py, PyTorch 1.13) through its row of the op
// table, forward and backward, on every compiled-in backend, with the row's tolerance per dtype.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "../common/source_dir.h"
#include "op_table.h"
#include "zt/autograd/autograd.h"
#include "zt/ops/ops.h"

namespace zt::test {
namespace {

json load(const std::string& name) {
  std::ifstream f(testing_util::source_dir() + "/tests/golden/" + name);
  EXPECT_TRUE(f.good()) << "missing fixture " << name << "; run tests/golden/gen_golden*.py";
  return f.good() ? json::parse(f) : json{{"cases", json::array()}};
}

void run_case(const json& c, const std::string& backend) {
  const OpRow* row = find_row(c["op"]);
  ASSERT_NE(row, nullptr) << "no row for op " << c["op"] << " in the op table";
  const DType dt = dtype_from_name(c["dtype"]);
  std::vector<Tensor> stored, views;
  for (const auto& spec : c["inputs"]) {
    Tensor s = on_backend(Tensor::from_vector(spec["data"].get<std::vector<float>>(), spec["shape"].get<Shape>(), dt),
                          backend);
    Tensor v = spec["t"].get<bool>() ? s.transpose(-2, -1) : s;
    autograd::set_requires_grad(v, true);
    stored.push_back(s);
    views.push_back(v);
  }
  Tensor out = row->run(views, c);
  expect_close(out, c["out"], row->tol.of(out.dtype()), "forward");
  if (row->extra) row->extra(c, stored, out);
  if (!c.contains("upstream")) return;
  Tensor up = Tensor::from_vector(c["upstream"]["data"].get<std::vector<float>>(), c["upstream"]["shape"].get<Shape>(),
                                  out.dtype());
  autograd::backward(out, on_backend(up, backend));
  for (size_t i = 0; i < views.size(); ++i)
    expect_close(autograd::grad(views[i]), c["grads"][i], row->tol.of(dt), "grad of input " + std::to_string(i));
}

struct Param {
  std::string backend, file;
};
void PrintTo(const Param& p, std::ostream* os) { *os << p.backend << " " << p.file; }

class GoldenFixture : public ::testing::TestWithParam<Param> {};

TEST_P(GoldenFixture, MatchesPyTorchForwardAndBackward) {
  ZT_SKIP_WITHOUT_DEVICE(GetParam().backend);
  const json doc = load(GetParam().file);
  ASSERT_GT(doc["cases"].size(), 0u);
  for (const json& c : doc["cases"]) {
    SCOPED_TRACE(GetParam().file + ": " + c["name"].get<std::string>() + " (" + c["dtype"].get<std::string>() + ")");
    run_case(c, GetParam().backend);
  }
}

std::vector<Param> params() {
  std::vector<Param> p;
  for (const auto& b : ops::backends())
    for (const char* f :
         {"matmul", "linear", "linear_gelu", "elementwise", "reduce", "softmax", "loss", "transformer", "llama"})
      p.push_back({b, f + std::string(".json")});
  return p;
}

INSTANTIATE_TEST_SUITE_P(Ops, GoldenFixture, ::testing::ValuesIn(params()), [](const auto& info) {
  return info.param.backend + "_" + info.param.file.substr(0, info.param.file.find('.'));
});

// Every fixture file has cases in every float dtype.
TEST(Golden, FixturesCoverEveryDtype) {
  for (const char* f : {"matmul.json", "linear.json", "linear_gelu.json", "elementwise.json", "reduce.json",
                        "softmax.json", "loss.json", "transformer.json", "llama.json"}) {
    const json doc = load(f);
    std::set<std::string> here;
    for (const json& c : doc["cases"]) here.insert(c["dtype"].get<std::string>());
    EXPECT_EQ(here, (std::set<std::string>{"f32", "bf16", "f16"})) << f;
  }
}

}  // namespace
}  // namespace zt::test
