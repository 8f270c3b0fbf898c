#pragma once
// Optimizers over one flat fp32 buffer (a rank's ZeRO shard). Semantics equal PyTorch 1.13's
// single-tensor (foreach=False) Adam, AdamW and SGD, with the same float operation order.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zt/core/tensor.h"

namespace zt::optim {

struct OptimizerSpec {
  std::string type = "AdamW";  // Adam | AdamW | SGD, case-insensitive
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.f, momentum = 0.f;
  bool nesterov = false;
};

// Bytes of optimizer state per parameter element (Adam/AdamW 8, SGD with momentum 4, else 0),
// known before any optimizer exists, for memory estimates.
int64_t state_bytes_per_elem(const OptimizerSpec& spec);

class FlatOptimizer {
 public:
  // n = shard elements. State is allocated here, tagged MemTag::optim: Adam/AdamW 8 bytes per
  // element (exp_avg, exp_avg_sq), SGD with momentum 4 (momentum_buffer), plain SGD none.
  // Throws zt::Error for an unknown type or an out-of-range hyper-parameter.
  static std::unique_ptr<FlatOptimizer> create(const OptimizerSpec& spec, int64_t n);
  virtual ~FlatOptimizer() = default;

  // One update of params[0, n) from grads[0, n) with this step's lr (from the schedule);
  // increments steps(). params and grads must not overlap each other or the state.
  virtual void step(float* params, const float* grads, float lr) = 0;

  int64_t steps() const { return steps_; }
  void set_steps(int64_t s);  // after loading state from a checkpoint
  int64_t size() const { return n_; }
  const OptimizerSpec& spec() const { return spec_; }

  // Named state tensors ("exp_avg", "exp_avg_sq" / "momentum_buffer"), shape {n}, for
  // checkpoints; they are handles, so copy_() into them restores the state.
  virtual std::vector<std::pair<std::string, Tensor>> state() = 0;
  size_t state_bytes() const { return state_bytes_; }

 protected:
  FlatOptimizer(const OptimizerSpec& spec, int64_t n) : spec_(spec), n_(n) {}
  static Tensor make_state(int64_t n);  // zero-filled f32 {n}, MemTag::optim

  OptimizerSpec spec_;
  int64_t n_ = 0;
  int64_t steps_ = 0;
  size_t state_bytes_ = 0;
};

// Elements per parallel chunk; below this the update runs on the calling thread.
constexpr int64_t kOptimGrain = int64_t(1) << 14;

}  // namespace zt::optim
