// Forward and backward of every op against PyTorch fixtures (tests/golden/gen_golden.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/ops/ops.h"

namespace zt {
namespace {

using nlohmann::json;

json load(const std::string& name) {
  std::ifstream f(std::string(ZT_SOURCE_DIR) + "/tests/golden/" + name);
  EXPECT_TRUE(f.good()) << "missing fixture " << name << "; run tests/golden/gen_golden.py";
  return json::parse(f);
}

float rtol_of(DType dt) { return dt == DType::bf16 ? 1e-2f : 1e-5f; }

// |a - e| <= rtol * (|e| + max|e|): relative, with a floor tied to the tensor's scale.
void expect_close(const Tensor& actual, const json& expected, DType dt, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  EXPECT_EQ(actual.shape(), expected["shape"].get<Shape>()) << what;
  const auto e = expected["data"].get<std::vector<float>>();
  const auto a = actual.to_vector();
  ASSERT_EQ(a.size(), e.size()) << what;
  float scale = 0;
  for (float v : e) scale = std::max(scale, std::fabs(v));
  const float rtol = rtol_of(dt);
  int bad = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    const float tol = rtol * (std::fabs(e[i]) + scale) + 1e-7f;
    if (!(std::fabs(a[i] - e[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << a[i] << ", torch " << e[i] << " (tol " << tol << ")";
  }
}

struct Inputs {
  std::vector<Tensor> stored, views;
};

Inputs make_inputs(const json& c, DType dt) {
  Inputs in;
  for (const auto& spec : c["inputs"]) {
    Tensor s = Tensor::from_vector(spec["data"].get<std::vector<float>>(), spec["shape"].get<Shape>(), dt);
    Tensor v = spec["t"].get<bool>() ? s.transpose(-2, -1) : s;
    autograd::set_requires_grad(v, true);
    in.stored.push_back(s);
    in.views.push_back(v);
  }
  return in;
}

Tensor targets_of(const json& c) {
  auto t = c["targets"].get<std::vector<int32_t>>();
  return Tensor::from_ints(t, {int64_t(t.size())});
}

// Runs the differentiable op named in the fixture.
Tensor run(const json& c, const std::vector<Tensor>& x) {
  const std::string op = c["op"];
  const json& p = c["params"];
  if (op == "matmul") return ag::matmul(x[0], x[1]);
  if (op == "linear") return ag::linear(x[0], x[1], x.size() > 2 ? &x[2] : nullptr);
  if (op == "add") return ag::add(x[0], x[1]);
  if (op == "sub") return ag::sub(x[0], x[1]);
  if (op == "mul") return ag::mul(x[0], x[1]);
  if (op == "scale") return ag::scale(x[0], p["s"].get<float>());
  if (op == "relu") return ag::relu(x[0]);
  if (op == "gelu") return ag::gelu(x[0]);
  if (op == "sum") return ag::sum(x[0]);
  if (op == "mean") return ag::mean(x[0]);
  if (op == "sum_dim") return ag::sum(x[0], p["dim"].get<int64_t>(), p["keepdim"].get<bool>());
  if (op == "mean_dim") return ag::mean(x[0], p["dim"].get<int64_t>(), p["keepdim"].get<bool>());
  if (op == "softmax") return ag::softmax(x[0]);
  if (op == "log_softmax") return ag::log_softmax(x[0]);
  if (op == "cross_entropy") return ag::cross_entropy(x[0], targets_of(c), p["ignore_index"].get<int64_t>());
  if (op == "add_scalar") return ops::add_scalar(x[0], p["s"].get<float>());
  if (op == "argmax") return ops::argmax(x[0]);
  ADD_FAILURE() << "unknown op " << op;
  return {};
}

void run_file(const std::string& file) {
  const json doc = load(file);
  ASSERT_GT(doc["cases"].size(), 0u);
  for (const json& c : doc["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(file + ": " + name);
    const DType dt = dtype_from_name(c["dtype"]);
    Inputs in = make_inputs(c, dt);
    Tensor out = run(c, in.views);
    expect_close(out, c["out"], c["op"] == "cross_entropy" ? DType::f32 : dt, name + " forward");
    if (c["op"] == "matmul") {  // the same product through explicit transpose flags
      const auto& s = c["inputs"];
      Tensor viaflags = ops::matmul(in.stored[0], in.stored[1], s[0]["t"].get<bool>(), s[1]["t"].get<bool>());
      expect_close(viaflags, c["out"], dt, name + " forward via trans flags");
    }
    if (c["op"] == "argmax") {
      const auto pred = c["out"]["data"].get<std::vector<float>>();
      const auto tgt = c["targets"].get<std::vector<int32_t>>();
      int64_t match = 0;
      for (size_t i = 0; i < tgt.size(); ++i) match += int32_t(pred[i]) == tgt[i];
      EXPECT_EQ(ops::count_correct(in.views[0], targets_of(c)), match);
    }
    if (!c.contains("upstream")) continue;
    Tensor up = Tensor::from_vector(c["upstream"]["data"].get<std::vector<float>>(),
                                    c["upstream"]["shape"].get<Shape>(), out.dtype());
    autograd::backward(out, up);
    for (size_t i = 0; i < in.views.size(); ++i)
      expect_close(autograd::grad(in.views[i]), c["grads"][i], dt, name + " grad of input " + std::to_string(i));
  }
}

TEST(Golden, Matmul) { run_file("matmul.json"); }
TEST(Golden, Linear) { run_file("linear.json"); }
TEST(Golden, Elementwise) { run_file("elementwise.json"); }
TEST(Golden, Reduce) { run_file("reduce.json"); }
TEST(Golden, Softmax) { run_file("softmax.json"); }
TEST(Golden, Loss) { run_file("loss.json"); }

}  // namespace
}  // namespace zt
