// Contracts of the softmax family over the last dimension and the fused cross-entropy loss,
// with their backward. Kernels compute in f32 whatever the input dtype.
#include "contract.h"
#include "cpu/kernels.h"
#include "zt/ops/ops.h"

namespace zt::ops {

using detail::check_float;

namespace {

void check_rows(const Tensor& x, const char* op) {
  ZT_CHECK(x.dim() >= 1, "[", op, "] needs at least one dimension, got a 0-d tensor");
}

Tensor softmax_impl(const Tensor& x_in, bool log, const char* op) {
  check_float(x_in, op);
  check_rows(x_in, op);
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  ZT_RUN(softmax, op, x.device(), x, log, out);
  return out;
}

Tensor softmax_backward_impl(const Tensor& dy_in, const Tensor& y_in, bool log, const char* op) {
  check_float(dy_in, op);
  check_float(y_in, op);
  detail::check_same_dtype(dy_in, y_in, op);
  detail::check_same_shape(dy_in, y_in, op, "dy", "y");
  check_rows(y_in, op);
  Tensor dy = dy_in.contiguous(), y = y_in.contiguous();
  Tensor out = Tensor::empty(y.shape(), y.dtype(), y.device());
  if (out.numel() == 0) return out;
  ZT_RUN(softmax_backward, op, y.device(), dy, y, log, out);
  return out;
}

void check_targets(const Tensor& logits, const Tensor& targets, int64_t ignore_index, const char* op) {
  check_float(logits, op);
  ZT_CHECK(logits.dim() == 2, "[", op, "] logits must be [N, C], got ", shape_str(logits.shape()));
  ZT_CHECK(targets.dtype() == DType::i32, "[", op, "] targets must be i32, got ", dtype_name(targets.dtype()));
  ZT_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0), "[", op, "] targets ", shape_str(targets.shape()),
           " do not match logits ", shape_str(logits.shape()));
  Tensor t = targets.contiguous().to(Device::cpu());  // checked on the host, whatever the device
  const int32_t* pt = t.data<int32_t>();
  const int64_t c = logits.size(1);
  for (int64_t i = 0; i < t.numel(); ++i)
    ZT_CHECK(pt[i] == ignore_index || (pt[i] >= 0 && pt[i] < c), "[", op, "] target ", pt[i], " at row ", i,
             " is outside [0, ", c, ") and is not ignore_index ", ignore_index);
}

}  // namespace

Tensor softmax(const Tensor& x) { return softmax_impl(x, false, "softmax"); }
Tensor log_softmax(const Tensor& x) { return softmax_impl(x, true, "log_softmax"); }
Tensor softmax_backward(const Tensor& dy, const Tensor& y) {
  return softmax_backward_impl(dy, y, false, "softmax_backward");
}
Tensor log_softmax_backward(const Tensor& dy, const Tensor& y) {
  return softmax_backward_impl(dy, y, true, "log_softmax_backward");
}

// Note [all targets ignored]: the loss is 0 (torch gives NaN) and the gradient is zero, so a
// micro-batch of padding cannot poison training.
//
// Note [one-pass classifier]: with_grad writes the gradient of the mean loss (dloss = 1) in the
// forward's kernel, as each row's log-sum-exp is known, so a training step reads the [N, C]
// logits once (llm.c's fused classifier) and keeps no copy of them for backward; the backward
// scales it where the loss's gradient is not 1. For dloss = 1 its values are the two-pass
// backward's, bit for bit (the same k = 1/count and the same block code). Autograd asks for it
// where the logits are not f16: an f16 gradient written before the loss scale multiplies it would
// underflow where loss scaling exists to keep it.
CrossEntropyResult cross_entropy(const Tensor& logits_in, const Tensor& targets_in, int64_t ignore_index,
                                 bool with_grad) {
  check_targets(logits_in, targets_in, ignore_index, "cross_entropy");
  ZT_CHECK(detail::is_float(logits_in.dtype()), "[cross_entropy] logits dtype ", dtype_name(logits_in.dtype()),
           " is not a float type");
  Tensor targets = targets_in.contiguous();
  const int64_t n = logits_in.size(0), c = logits_in.size(1);
  CrossEntropyResult res;
  const Tensor logits = logits_in.contiguous();
  const Device dev = logits.device();
  const Tensor targets_host = targets.to(Device::cpu());
  const int32_t* pt = targets_host.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) res.count += pt[i] != ignore_index;
  res.lse = Tensor::empty({n}, DType::f32, dev);
  Tensor nll = Tensor::empty({n}, DType::f32, dev);
  if (with_grad)
    res.grad = Tensor::empty(logits.shape(), logits.dtype(), dev);
  else
    res.logits = logits;
  const float k = res.count ? 1.f / float(res.count) : 0.f;  // Note [all targets ignored]
  if (n * c > 0)
    ZT_RUN(cross_entropy_rows, __func__, dev, logits, targets, ignore_index, k, res.lse, nll,
           with_grad ? &res.grad : nullptr);
  const Tensor nll_host = nll.to(Device::cpu());
  const float* pn = nll_host.data<float>();
  double total = 0;  // summed on the host in row order: independent of threads and device
  for (int64_t i = 0; i < n; ++i)
    if (pt[i] != ignore_index) total += pn[i];
  res.loss = Tensor::full({}, res.count ? float(total / double(res.count)) : 0.f, DType::f32).to(dev);
  return res;
}

Tensor cross_entropy_backward(float dloss, const CrossEntropyResult& saved, const Tensor& targets_in,
                              int64_t ignore_index) {
  if (saved.grad.defined()) return dloss == 1.f ? saved.grad : scale(saved.grad, dloss);  // Note [one-pass classifier]
  check_targets(saved.logits, targets_in, ignore_index, "cross_entropy_backward");
  Tensor targets = targets_in.contiguous();
  Tensor out = Tensor::empty(saved.logits.shape(), saved.logits.dtype(), saved.logits.device());
  if (out.numel() == 0) return out;
  const float k = saved.count ? dloss / float(saved.count) : 0.f;  // Note [all targets ignored]
  ZT_RUN(cross_entropy_backward, __func__, out.device(), saved.logits, saved.lse, targets, ignore_index, k, out);
  return out;
}

}  // namespace zt::ops
