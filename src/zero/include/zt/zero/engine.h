#pragma once
// The ZeRO engine: packs a model's parameters into flat buffers, partitions optimizer states
// (stage 1), gradients (stage 2) and parameters (stage 3) over a comm::Group, and runs the
// step order of DESIGN.md. With a one-rank group it is plain single-process training.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zt/comm/group.h"
#include "zt/core/tensor.h"
#include "zt/nn/module.h"
#include "zt/optim/optimizer.h"
#include "zt/zero/layout.h"

namespace zt::zero {

struct EngineOptions {
  int stage = 0;
  int64_t gradient_accumulation_steps = 1;
  double gradient_clipping = 0.0;  // max global norm; 0 = off
  bool overlap_comm = true;        // reduce buckets while backward continues
  int64_t reduce_bucket_size = 500'000'000;           // elements (stages 0-2)
  int64_t stage3_prefetch_bucket_size = 50'000'000;   // elements gathered ahead
  int64_t stage3_max_live_parameters = 1'000'000'000; // elements gathered at once
  int64_t stage3_param_persistence_threshold = 100'000;  // units this small stay gathered
  optim::OptimizerSpec optimizer;
};

struct StepStats {
  double grad_norm = 0;  // global L2 norm before clipping
  double clip_coef = 1;
};

class Engine {
 public:
  Engine(nn::Module& model, comm::GroupPtr group, EngineOptions opts);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Tensor forward(const Tensor& x) { return model_(x); }
  void backward(const Tensor& loss);  // one micro-batch; scales by 1/gradient_accumulation_steps
  bool at_boundary() const { return micro_ > 0 && micro_ % opts_.gradient_accumulation_steps == 0; }
  StepStats step(double lr);          // only at the accumulation boundary

  // Calls fn(name, full parameter) for every parameter (stage 3 gathers unit by unit).
  void for_each_full_param(const std::function<void(const std::string&, const Tensor&)>& fn);

  const std::vector<BufferPlan>& plan() const { return plan_; }
  MemoryEstimate expected_memory() const;  // what the allocator must show for param/grad/optim
  int64_t num_params() const;
  int64_t padded_params() const;
  const comm::GroupPtr& group() const { return group_; }
  const EngineOptions& options() const { return opts_; }
  int64_t optimizer_steps() const { return steps_; }

 private:
  struct Buffer;
  void bind_params(Buffer& b);  // point the buffer's parameters into full_param
  void unbind_params(Buffer& b);
  void attach_grad_views(Buffer& b);
  void on_param_ready(size_t bi);
  void launch_reduce(size_t bi);
  void finish_reduce(size_t bi);
  void finish_all_reduces();
  double local_grad_sumsq();
  void scale_grads(float s);
  void all_gather_params(Buffer& b);
  // Stage 3.
  void install_stage3_hooks();
  void gather_unit(size_t bi, bool async);
  void release_unit(size_t bi);
  void prefetch_after(size_t bi, int dir);
  void prepare_unit_backward(size_t bi);

  nn::Module& model_;
  comm::GroupPtr group_;
  EngineOptions opts_;
  int world_, rank_;
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<BufferPlan> plan_;
  std::vector<std::unique_ptr<Buffer>> bufs_;
  std::vector<nn::Module*> units_;  // stage 3: unit i owns buffer i
  int64_t micro_ = 0, steps_ = 0;
  bool boundary_pass_ = false;  // the backward in progress ends an accumulation window
};

}  // namespace zt::zero
