#pragma once
// Note [device updates]: optimizer updates are kernels of every device's table (the CPU's in
// ops/cpu/update.cpp, Note [update loop]): PyTorch 1.13's single-tensor Adam/AdamW/SGD with the
// per-step scalars computed once on the host by optim::update, which calls these for every device.
#include "zt/core/tensor.h"

namespace zt::ops {

// m = m*beta1 + (1-beta1)*g; v = v*beta2 + ((1-beta2)*g)*g; w += neg_step_size*m / (sqrt(v)/bc2_sqrt + eps)
struct AdamStep {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  float bias_correction2_sqrt, neg_step_size;
  float l2;     // Adam with weight decay: g += l2 * w (used when l2_on)
  float decay;  // AdamW: w = w*decay + delta (used when decoupled)
  bool l2_on = false, decoupled = false;
};
// d = g (+ wd*w); momentum: b = first ? d : b*mom + d; d = nesterov ? d + mom*b : b; w += neg_lr*d
struct SgdStep {
  float wd, mom, neg_lr;
  bool weight_decay = false, momentum = false, first = false, nesterov = false;
};

// The gradient used is grad * grad_scale. param: f32/bf16/f16; master: fp32 or undefined (then
// param is f32 and updated in place); states fp32; all contiguous with param's numel, one device.
struct DeviceUpdate {
  Tensor param, master, grad;
  Tensor s0, s1;  // Adam: exp_avg, exp_avg_sq; SGD: momentum_buffer (s1 undefined)
  float grad_scale = 1.f;
  Tensor widened;  // optional, beside a master: f32, gets the rounded param's value (Note [widened by the update])
};
void adam_update(const AdamStep& s, const DeviceUpdate& u);
void sgd_update(const SgdStep& s, const DeviceUpdate& u);

}  // namespace zt::ops
