#pragma once
// Modules own parameters (leaf tensors with requires_grad) and children, with stable dotted
// names in registration order. Forward hooks let the ZeRO engine gather a stage-3 unit's
// parameters before its forward and release them after.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "zt/core/random.h"
#include "zt/core/tensor.h"

namespace zt::nn {

// Fills elements [begin, end) of a parameter's flat f32 values into out[0, end - begin). Each
// initialiser takes its own stream key from the model's generator when it is made (registration
// order), then any range is computed alone (Note [counter init] in core): in any order, on any rank.
using Init = std::function<void(float* out, int64_t begin, int64_t end)>;
// Fills `out` (host f32, contiguous) with elements [begin, begin + out.numel()) of init, on every
// thread; the values do not depend on the thread count.
void run_init(const Init& init, Tensor& out, int64_t begin);
// U(-bound, bound): torch's default for Linear and Conv2d (kaiming_uniform_ with a = sqrt(5)
// reduces to bound = 1/sqrt(fan_in), and so does the bias).
Init uniform_init(Generator& gen, float bound);

// Note [deferred init]: while a DeferredInit is alive, parameters registered with an Init get
// a shape but no memory; the ZeRO engine materialises them one buffer (stage 3: one unit) at
// a time, straight into its flat layout, as DeepSpeed's zero.Init does. Values equal eager init.
class DeferredInit {
 public:
  DeferredInit();
  ~DeferredInit();
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;

 private:
  bool prev_;
};
bool deferred_init_enabled();

class Module {
 public:
  using PreHook = std::function<void(Module&)>;
  using PostHook = std::function<Tensor(Module&, const Tensor& out)>;

  virtual ~Module() = default;
  virtual const char* type_name() const = 0;
  Tensor operator()(const Tensor& x);  // pre-hook, forward, post-hook
  // Several inputs (token ids, attention mask, token types): pre-hook, forward_inputs, post-hook.
  Tensor operator()(const std::vector<Tensor>& inputs);

  // Training mode (dropout on) for this module and its children, as torch's train()/eval().
  void train(bool on = true);
  // Moves every parameter (tied ones once) to `device` in place, as torch's module.to(device).
  void to(Device device);
  bool is_training() const { return training_; }

  std::vector<std::pair<std::string, Tensor>> named_parameters() const;  // recursive, dotted
  std::vector<Tensor> parameters() const;
  // Modules that own parameters directly, in registration order.
  std::vector<Module*> parameter_owners();
  // ZeRO-3's units, in registration order: a module marked as a unit (e.g. a transformer block)
  // with all its parameters, else every module that owns parameters directly.
  void set_zero_unit(bool on) { zero_unit_ = on; }
  std::vector<Module*> zero_units();
  std::vector<std::pair<std::string, Tensor>> unit_parameters() const;  // of a unit from zero_units()
  const std::vector<std::pair<std::string, Tensor>>& own_parameters() const { return params_; }
  int64_t num_parameters() const;
  // Initialisers of parameters registered while deferred (recursive), by tensor.
  std::unordered_map<const TensorImpl*, Init> deferred_initializers() const;

  void set_pre_hook(PreHook h) { pre_hook_ = std::move(h); }
  void set_post_hook(PostHook h) { post_hook_ = std::move(h); }

 protected:
  virtual Tensor forward(const Tensor& x) = 0;
  // Modules with several inputs override this; the default passes a single input to forward.
  virtual Tensor forward_inputs(const std::vector<Tensor>& inputs);
  // A call of this module by another entry than forward (LayerNorm::add_norm): its hooks run
  // around `run`, the post-hook on the tensor it returns.
  Tensor hooked(const std::function<Tensor()>& run);
  Tensor register_parameter(const std::string& name, Tensor t);
  // Eager: allocates and runs `init` now; under DeferredInit: shape only (Note [deferred init]).
  Tensor register_parameter(const std::string& name, const Shape& shape, Init init);
  void register_module(const std::string& name, std::shared_ptr<Module> m);
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<const TensorImpl*, Init>> deferred_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  PreHook pre_hook_;
  PostHook post_hook_;
  bool zero_unit_ = false;
  bool training_ = true;
};

// y = x W^T + b with PyTorch's default initialisation: W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  // Takes two stream keys from `gen` now; may defer its values (Note [deferred init]).
  Linear(int64_t in, int64_t out, bool bias, Generator& gen);
  // Weight and bias from the given initialisers (transformers: normal(0, 0.02) and zeros).
  Linear(int64_t in, int64_t out, bool bias, Init weight_init, Init bias_init);
  // A projection on another module's weight [out, in] (a tied weight; no bias): one parameter, two uses.
  explicit Linear(Tensor tied_weight);
  const char* type_name() const override { return "Linear"; }
  Tensor weight, bias;

 protected:
  Tensor forward(const Tensor& x) override;
};

class Activation : public Module {
 public:
  explicit Activation(std::string kind);  // "relu" | "gelu"
  const char* type_name() const override { return "Activation"; }

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  std::string kind_;
};

class Sequential : public Module {
 public:
  void add(std::shared_ptr<Module> m);
  const char* type_name() const override { return "Sequential"; }

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<Module*> order_;
};

// input -> hidden... -> classes, activation between layers; parameters named N.weight as in torch.nn.Sequential.
std::shared_ptr<Module> make_mlp(int64_t input, const std::vector<int64_t>& hidden, int64_t classes,
                                 const std::string& activation, uint64_t seed);

}  // namespace zt::nn
