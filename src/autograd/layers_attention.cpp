// ag::attention: ops::attention forward, and a node whose backward runs ops::attention_backward
// from the saved out and lse (flash style: nothing of size T x T is kept).
#include <memory>
#include <vector>

#include "zt/autograd/autograd.h"
#include "zt/autograd/layers.h"
#include "zt/ops/transformer.h"

namespace zt::ag {

Tensor attention(const Tensor& qkv, int64_t n_head, bool causal, const Tensor* key_mask, int64_t n_kv_head) {
  auto saved = std::make_shared<ops::AttentionResult>(ops::attention(qkv, n_head, causal, key_mask, n_kv_head));
  Tensor out = saved->out;
  saved->out = autograd::detached(out);
  const Tensor mask = key_mask ? *key_mask : Tensor();
  return autograd::record(out, {qkv}, "attention", [saved, qkv, n_head, causal, mask, n_kv_head](const Tensor& g) {
    return std::vector<Tensor>{
        ops::attention_backward(g, qkv, *saved, n_head, causal, mask.defined() ? &mask : nullptr, n_kv_head)};
  });
}

}  // namespace zt::ag
