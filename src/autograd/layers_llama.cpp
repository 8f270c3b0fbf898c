// Differentiable ops of the Llama family: rotary position embeddings and SwiGLU, each recording
// the backward of its contract in zt/ops/transformer.h (RMSNorm is in layers_norms.cpp).
#include <memory>
#include <utility>
#include <vector>

#include "zt/autograd/autograd.h"
#include "zt/autograd/layers.h"
#include "zt/ops/transformer.h"

namespace zt::ag {

using autograd::record;
using Grads = std::vector<Tensor>;

// A rotation's gradient is the inverse rotation: nothing is saved but the tables.
Tensor rope(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, const ops::RopeTables& tables) {
  return record(ops::rope(qkv, n_head, n_kv_head, tables), {qkv}, "rope",
                [n_head, n_kv_head, tables](const Tensor& g) {
                  return Grads{ops::rope(g, n_head, n_kv_head, tables, /*inverse=*/true)};
                });
}

Tensor swiglu(const Tensor& gate_up) {
  return record(ops::swiglu(gate_up), {gate_up}, "swiglu",
                [gate_up](const Tensor& g) { return Grads{ops::swiglu_backward(g, gate_up)}; });
}

}  // namespace zt::ag
