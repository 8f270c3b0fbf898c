// The rows of the op test table: each op once, with its tolerances and gradient-check inputs.
#include "op_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/autograd/layers.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"
#include "zt/ops/transformer.h"

namespace zt::test {
namespace {

// Class targets on the device of the op's inputs.
Tensor targets_of(const json& spec, Device d) {
  auto t = spec.at("targets").get<std::vector<int32_t>>();
  return Tensor::from_ints(t, {int64_t(t.size())}, d);
}

// Embedding ids: the case's {"shape", "data"} record (fixtures and gradient-check specs alike).
Tensor ids_of(const json& spec, Device d) {
  return Tensor::from_ints(spec.at("ids").at("data").get<std::vector<int32_t>>(), spec["ids"]["shape"].get<Shape>(), d);
}

const json& params(const json& spec) {
  static const json empty = json::object();
  return spec.contains("params") ? spec["params"] : empty;
}

GradInputs in(std::vector<Shape> shapes, json spec = json::object()) { return {std::move(shapes), std::move(spec)}; }

// The same product through explicit transpose flags instead of transposed views.
void matmul_via_flags(const json& c, const std::vector<Tensor>& stored, const Tensor&) {
  const auto& s = c["inputs"];
  Tensor out = ops::matmul(stored[0], stored[1], s[0]["t"].get<bool>(), s[1]["t"].get<bool>());
  expect_close(out, c["out"], Tolerance{}.of(out.dtype()), "forward via trans flags");
}

void argmax_counts(const json& c, const std::vector<Tensor>& stored, const Tensor&) {
  const auto pred = c["out"]["data"].get<std::vector<float>>();
  const auto tgt = c["targets"].get<std::vector<int32_t>>();
  int64_t match = 0;
  for (size_t i = 0; i < tgt.size(); ++i) match += int32_t(pred[i]) == tgt[i];
  EXPECT_EQ(ops::count_correct(stored[0], targets_of(c, stored[0].device())), match);
}

using RunFn = decltype(OpRow::run);
using ExtraFn = decltype(OpRow::extra);
using KinkFn = decltype(OpRow::off_kink);

OpRow row(std::string op, RunFn run, std::vector<GradInputs> grad_inputs = {}, KinkFn off_kink = {}, ExtraFn extra = {},
          Tolerance tol = {}, float grad_eps = 1e-2f) {
  OpRow r;
  r.op = std::move(op);
  r.run = std::move(run);
  r.grad_inputs = std::move(grad_inputs);
  r.off_kink = std::move(off_kink);
  r.extra = std::move(extra);
  r.tol = tol;
  r.grad_eps = grad_eps;
  return r;
}

float relu_off_kink(float v) { return std::fabs(v) < 0.1f ? (v < 0 ? v - 0.1f : v + 0.1f) : v; }

float param(const json& s, const char* name) { return params(s)[name].get<float>(); }
int64_t dim_of(const json& s) { return params(s)["dim"].get<int64_t>(); }
bool keep_of(const json& s) { return params(s)["keepdim"].get<bool>(); }

// One rounding of an exact f32 result: half an ulp of each dtype (relative), with some room.
constexpr Tolerance kOneRounding{1e-6f, 4e-3f, 5e-4f};

std::vector<OpRow> build() {
  using X = const std::vector<Tensor>&;
  using S = const json&;
  std::vector<OpRow> t;
  t.push_back(row(
      "matmul", [](X x, S) { return ag::matmul(x[0], x[1]); }, {in({{3, 4}, {4, 5}}), in({{2, 3, 4}, {2, 4, 2}})}, {},
      matmul_via_flags));
  t.push_back(row("linear", [](X x, S) { return ag::linear(x[0], x[1], x.size() > 2 ? &x[2] : nullptr); },
                  {in({{4, 5}, {3, 5}, {3}}), in({{2, 3, 5}, {3, 5}})}));
  // Rows 70: two bias-sum blocks of ops::kBiasGradBlockRows (the second a remainder).
  t.push_back(row("linear_gelu", [](X x, S) { return ag::linear_gelu(x[0], x[1], x.size() > 2 ? &x[2] : nullptr); },
                  {in({{4, 5}, {3, 5}, {3}}), in({{2, 3, 5}, {3, 5}}), in({{70, 2}, {3, 2}, {3}})}));
  t.push_back(row("add", [](X x, S) { return ag::add(x[0], x[1]); }, {in({{3, 4}, {4}})}));
  t.push_back(row("sub", [](X x, S) { return ag::sub(x[0], x[1]); }, {in({{3, 1}, {1, 4}})}));
  t.push_back(row("mul", [](X x, S) { return ag::mul(x[0], x[1]); }, {in({{2, 3, 4}, {3, 1}}), in({{5}, {5}})}));
  t.push_back(row(
      "scale", [](X x, S s) { return ag::scale(x[0], param(s, "s")); }, {in({{3, 7}}, {{"params", {{"s", -1.5}}}})}, {},
      {}, kOneRounding));
  t.push_back(row(
      "add_scalar", [](X x, S s) { return ops::add_scalar(x[0], param(s, "s")); }, {}, {}, {}, kOneRounding));
  t.push_back(row(
      "relu", [](X x, S) { return ag::relu(x[0]); }, {in({{3, 7}})}, relu_off_kink, {}, kOneRounding));
  t.push_back(row("gelu", [](X x, S) { return ag::gelu(x[0]); }, {in({{3, 7}})}));
  t.push_back(row("gelu_erf", [](X x, S) { return ag::gelu(x[0], ops::Gelu::erf); }, {in({{3, 7}})}));
  t.push_back(row("tanh", [](X x, S) { return ag::tanh(x[0]); }, {in({{3, 7}})}));
  t.push_back(row("linear_gelu_erf",
                  [](X x, S) { return ag::linear_gelu(x[0], x[1], x.size() > 2 ? &x[2] : nullptr, ops::Gelu::erf); },
                  {in({{4, 5}, {3, 5}, {3}}), in({{70, 2}, {3, 2}, {3}})}));
  t.push_back(row("sum", [](X x, S) { return ag::sum(x[0]); }, {in({{3, 5}})}));
  t.push_back(row("mean", [](X x, S) { return ag::mean(x[0]); }, {in({{3, 5}})}));
  t.push_back(row("sum_dim", [](X x, S s) { return ag::sum(x[0], dim_of(s), keep_of(s)); },
                  {in({{2, 3, 4}}, {{"params", {{"dim", 1}, {"keepdim", false}}}})}));
  t.push_back(row("mean_dim", [](X x, S s) { return ag::mean(x[0], dim_of(s), keep_of(s)); },
                  {in({{2, 3, 4}}, {{"params", {{"dim", -1}, {"keepdim", true}}}})}));
  t.push_back(row("softmax", [](X x, S) { return ag::softmax(x[0]); }, {in({{3, 6}})}));
  t.push_back(row("log_softmax", [](X x, S) { return ag::log_softmax(x[0]); }, {in({{2, 2, 5}})}));
  t.push_back(
      row("cross_entropy",
          [](X x, S s) { return ag::cross_entropy(x[0], targets_of(s, x[0].device()), params(s)["ignore_index"].get<int64_t>()); },
          {in({{4, 5}}, {{"params", {{"ignore_index", -100}}}, {"targets", {2, -100, 0, 4}}}),
           in({{3, 4}}, {{"params", {{"ignore_index", 3}}}, {"targets", {1, 3, 3}}})}));
  t.push_back(row(
      "argmax", [](X x, S) { return ops::argmax(x[0]); }, {}, {}, argmax_counts));
  t.push_back(row("embedding", [](X x, S s) { return ag::embedding(x[0], ids_of(s, x[0].device())); },
                  {in({{6, 4}}, {{"ids", {{"shape", {2, 3}}, {"data", {5, 0, 5, 2, 5, 1}}}}})}));
  t.push_back(row("layer_norm", [](X x, S s) { return ag::layer_norm(x[0], x[1], x[2], param(s, "eps")); },
                  {in({{3, 7}, {7}, {7}}, {{"params", {{"eps", 1e-5}}}}),
                   in({{2, 2, 11}, {11}, {11}}, {{"params", {{"eps", 1e-3}}}})}));
  t.push_back(row("rms_norm", [](X x, S s) { return ag::rms_norm(x[0], x[1], param(s, "eps")); },
                  {in({{3, 7}, {7}}, {{"params", {{"eps", 1e-6}}}}),
                   in({{2, 2, 11}, {11}}, {{"params", {{"eps", 1e-3}}}})}));
  // Note [fused residual norms]: out = s + norm(s), s = x + r, so the norm's dx adds into the add's.
  t.push_back(row("add_layer_norm",
                  [](X x, S s) {
                    const ag::AddNorm a = ag::add_layer_norm(x[0], x[1], x[2], x[3], param(s, "eps"));
                    return ag::add(a.sum, a.y);
                  },
                  {in({{2, 3, 20}, {2, 3, 20}, {20}, {20}}, {{"params", {{"eps", 1e-5}}}})}));
  t.push_back(row("add_rms_norm",
                  [](X x, S s) {
                    const ag::AddNorm a = ag::add_rms_norm(x[0], x[1], x[2], param(s, "eps"));
                    return ag::add(a.sum, a.y);
                  },
                  {in({{2, 3, 20}, {2, 3, 20}, {20}}, {{"params", {{"eps", 1e-5}}}})}));
  // Tables of the case's positions on the input's device (the model makes them once per length).
  t.push_back(row("rope",
                  [](X x, S s) {
                    const int64_t h = params(s)["n_head"], k = params(s)["n_kv_head"];
                    const int64_t d = x[0].size(2) / (h + 2 * k);
                    return ag::rope(x[0], h, k, ops::rope_tables(x[0].size(1), d, param(s, "theta"), x[0].device()));
                  },
                  {in({{2, 3, 32}}, {{"params", {{"n_head", 2}, {"n_kv_head", 1}, {"theta", 10000.0}}}}),
                   in({{1, 4, 24}}, {{"params", {{"n_head", 2}, {"n_kv_head", 2}, {"theta", 10.0}}}})}));
  t.push_back(row("swiglu", [](X x, S) { return ag::swiglu(x[0]); }, {in({{3, 8}}), in({{2, 2, 6}})}));
  // A fixed seed makes dropout linear in x (the same mask every call): no fixtures, gradient only.
  t.push_back(row("dropout",
                  [](X x, S s) { return ag::dropout(x[0], param(s, "p"), params(s)["seed"].get<uint64_t>()); },
                  {in({{5, 9}}, {{"params", {{"p", 0.4}, {"seed", 7}}}})}));
  t.push_back(row("select", [](X x, S s) { return ag::select(x[0], dim_of(s), params(s)["index"].get<int64_t>()); },
                  {in({{2, 3, 4}}, {{"params", {{"dim", 1}, {"index", -1}}}})}));
  t.push_back(row("reshape", [](X x, S) { return ag::reshape(x[0], {2, 6}); }, {in({{3, 4}})}));
  t.push_back(row("transpose", [](X x, S) { return ag::transpose(x[0], 0, 1); }, {in({{3, 4}})}));
  return t;
}

}  // namespace

const std::vector<OpRow>& op_table() {
  static const std::vector<OpRow> rows = build();
  return rows;
}

const OpRow* find_row(const std::string& op) {
  for (const auto& r : op_table())
    if (r.op == op) return &r;
  return nullptr;
}

void expect_close(const Tensor& actual, const json& expected, float rtol, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  EXPECT_EQ(actual.shape(), expected["shape"].get<Shape>()) << what;
  const auto e = expected["data"].get<std::vector<float>>();
  const auto a = actual.to_vector();
  ASSERT_EQ(a.size(), e.size()) << what;
  float scale = 0;
  for (float v : e) scale = std::max(scale, std::fabs(v));
  int bad = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    const float tol = rtol * (std::fabs(e[i]) + scale) + 1e-7f;
    if (!(std::fabs(a[i] - e[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << a[i] << ", torch " << e[i] << " (tol " << tol << ")";
  }
}

namespace {
double weighted_sum(const Tensor& y, const std::vector<float>& r) {
  auto v = y.to_vector();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += double(v[i]) * r[i];
  return s;
}
}  // namespace

void gradcheck(const std::vector<Shape>& shapes, const GradFn& f, const std::function<float(float)>& off_kink,
               float eps, const std::string& backend, const std::function<void(std::vector<float>&)>& spread) {
  Generator g(42);
  std::vector<Tensor> x;
  for (const auto& s : shapes) {
    std::vector<float> v(static_cast<size_t>(shape_numel(s)));
    for (auto& e : v) e = off_kink ? off_kink(g.normal(0.f, 1.f)) : g.normal(0.f, 1.f);
    if (spread) spread(v);
    x.push_back(on_backend(Tensor::from_vector(v, s), backend));
    autograd::set_requires_grad(x.back(), true);
  }
  Tensor y = f(x);
  std::vector<float> r(static_cast<size_t>(y.numel()));
  for (auto& v : r) v = g.uniform(-1.f, 1.f);
  autograd::backward(y, Tensor::from_vector(r, y.shape()).to(y.device()));
  for (size_t k = 0; k < x.size(); ++k) {
    const auto analytic = autograd::grad(x[k]).to_vector();
    ASSERT_EQ(int64_t(analytic.size()), x[k].numel());
    // Perturbed on a host copy and copied in: the input may live on a GPU.
    Tensor host = x[k].to(Device::cpu()).clone();
    float* p = host.data<float>();
    for (int64_t i = 0; i < x[k].numel(); ++i) {
      autograd::NoGradGuard ng;
      const float orig = p[i];
      p[i] = orig + eps;
      x[k].copy_(host);
      const double lp = weighted_sum(f(x), r);
      p[i] = orig - eps;
      x[k].copy_(host);
      const double lm = weighted_sum(f(x), r);
      p[i] = orig;
      x[k].copy_(host);
      const double num = (lp - lm) / (2.0 * eps);
      EXPECT_NEAR(analytic[size_t(i)], num, 1e-2 * std::fabs(num) + 2e-3) << "input " << k << " element " << i;
    }
  }
}

Device backend_device(const std::string& backend) {
  return backend == "cuda" ? Device::cuda(0) : backend == "sim" ? Device::sim() : Device::cpu();
}

bool backend_present(const std::string& backend) { return is_available(backend_device(backend)); }

Tensor on_backend(const Tensor& t, const std::string& backend) { return t.to(backend_device(backend)); }

}  // namespace zt::test
