#pragma once
// The op test table (ggml's harness): one row per op with how to run it, per-dtype tolerances,
// the finite-difference step, and a hook that keeps random inputs away from kinks. The golden
// test runs every fixture case through its row; the gradient check runs every row's inputs.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zt/core/tensor.h"

namespace zt::test {

using nlohmann::json;

// Relative tolerance per dtype: |got - want| <= rtol * (|want| + max|want|).
struct Tolerance {
  float f32 = 1e-5f, bf16 = 1e-2f, f16 = 2e-3f;
  float of(DType dt) const { return dt == DType::bf16 ? bf16 : dt == DType::f16 ? f16 : f32; }
};

// Inputs for one finite-difference check: shapes plus the case's params/targets (as in fixtures).
struct GradInputs {
  std::vector<Shape> shapes;
  json spec = json::object();  // {"params": {...}, "targets": [...]}
};

struct OpRow {
  std::string op;  // the fixtures' "op"
  // Runs the op (through autograd when differentiable) on inputs; spec has params and targets.
  std::function<Tensor(const std::vector<Tensor>& x, const json& spec)> run;
  Tolerance tol;
  std::vector<GradInputs> grad_inputs;  // empty: not differentiable (no gradient check)
  float grad_eps = 1e-2f;
  // Kink hook: moves a random input value off a point where the op is not differentiable.
  std::function<float(float)> off_kink;
  // Checks beyond the table's (the same product via transpose flags, count_correct, ...).
  std::function<void(const json& c, const std::vector<Tensor>& stored, const Tensor& out)> extra;
};

const std::vector<OpRow>& op_table();
// Compares a tensor with a fixture record {"shape", "data"} within rtol (see Tolerance).
void expect_close(const Tensor& actual, const json& expected, float rtol, const std::string& what);
const OpRow* find_row(const std::string& op);

// The device of one of ops::backends() ("cuda" is GPU 0, "sim" sim:0).
Device backend_device(const std::string& backend);
// A tensor moved onto one of ops::backends() (identity for cpu; "cuda" is GPU 0, "sim" sim:0).
Tensor on_backend(const Tensor& t, const std::string& backend);
// Whether this machine has the backend's device: a CUDA build runs its rows only where a GPU is.
bool backend_present(const std::string& backend);
#define ZT_SKIP_WITHOUT_DEVICE(backend) \
  if (!::zt::test::backend_present(backend)) GTEST_SKIP() << "no GPU here: the " << (backend) << " rows need one"

// Central finite differences in f32 on `backend`: the gradient of L = sum(f(x) * R) (R fixed random
// weights) must match (L(x+e) - L(x-e)) / 2e. Inputs are drawn from N(0, 1), moved off kinks by
// off_kink, then (when given) rewritten by spread (e.g. made distinct for max pooling).
using GradFn = std::function<Tensor(const std::vector<Tensor>&)>;
void gradcheck(const std::vector<Shape>& shapes, const GradFn& f, const std::function<float(float)>& off_kink,
               float eps, const std::string& backend, const std::function<void(std::vector<float>&)>& spread = {});

}  // namespace zt::test
