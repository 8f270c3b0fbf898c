#pragma once
// Reverse-mode autograd. Every recorded op appends a Node with a sequence number; backward
// visits the nodes reachable from the loss in reverse recording order (the tape order), so
// a node runs only after every consumer of its output. Leaves with requires_grad accumulate
// into .grad; a grad-ready hook fires once a leaf's gradient is final for this pass.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zt/core/tensor.h"

namespace zt {

namespace autograd {

// Gradients w.r.t. each input, in input order (an undefined Tensor means "no gradient").
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out)>;
using GradHook = std::function<void(Tensor& leaf)>;
using GradSlotHook = std::function<void(const Tensor& leaf)>;
using GradPartialHook = std::function<void(Tensor& leaf, int uses_left)>;
using GradSink = std::function<void(const Tensor& leaf, const Tensor& grad)>;
// Writes rows [row0, row0 + dst.size(0)) of a gradient into dst ([rows, row length], any float dtype).
using GradRows = std::function<void(Tensor& dst, int64_t row0)>;

struct Node {
  uint64_t seq = 0;
  std::string name;
  std::vector<Tensor> inputs;
  BackwardFn backward;
  Tensor grad;  // accumulated gradient of this node's output during a backward pass
};

}  // namespace autograd

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  std::vector<autograd::GradHook> grad_ready_hooks;
  autograd::GradSlotHook grad_slot_hook;
  autograd::GradPartialHook grad_partial_hook;
  autograd::GradSink grad_sink;  // takes each use's gradient instead of .grad (Note [gradient blocks])
  // Sparse gradients (DeepSpeed's sparse_gradients): an embedding weight marked sparse collects
  // the rows its uses touched in this accumulation window, so ranks exchange only those rows.
  bool sparse_grad = false;
  std::vector<int32_t> touched_rows;  // sorted, distinct
  // Set on a gradient made by adding_grad(): how it adds itself into the slot it reaches.
  std::function<void(Tensor& slot, bool zeroed)> add_into;
  autograd::GradRows rows;  // and, where it can, how it writes a range of its rows alone
  // The leaf's .grad holds no gradient yet (set_grad's `zeroed`: zeros, or values a step left):
  // the next gradient writes it whole (Note [stale gradient slots] in zero/grad_reducer.cpp).
  bool grad_zeroed = false;
};

namespace autograd {

bool requires_grad(const Tensor& t);
void set_requires_grad(const Tensor& t, bool on);
Tensor grad(const Tensor& t);              // undefined if none yet
// The engine accumulates into g in place; `zeroed` says g's values are not a gradient yet (zeros,
// or stale), so the first gradient is written whole instead of added (Note [gradients written in
// place] in zt/ops/ops.h).
void set_grad(const Tensor& t, Tensor g, bool zeroed = false);
void mark_grad_zeroed(const Tensor& t);  // its .grad's values stop being a gradient (zeroed or stale)
bool grad_zeroed(const Tensor& t);       // no gradient has reached its .grad since
bool is_leaf(const Tensor& t);
void add_grad_ready_hook(const Tensor& leaf, GradHook hook);
void clear_grad_ready_hooks(const Tensor& leaf);
// Called when a gradient is about to reach a leaf that has no .grad yet: the hook may set_grad()
// a zeroed slot (a view into a flat bucket) to accumulate into, instead of a fresh tensor.
// Slots may have another float dtype than the gradient (accumulation converts).
void set_grad_slot_hook(const Tensor& leaf, GradSlotHook hook);
// Called after a use's gradient has been added to a leaf used more than once, while uses_left
// more of this pass are still to come (a tied weight: the output projection before the embedding).
void set_grad_partial_hook(const Tensor& leaf, GradPartialHook hook);
// Note [gradient blocks] (zero/grad_blocks.cpp): each use's gradient goes to `sink` as it is
// made, never into .grad; grad-ready and partial hooks fire as before. nullptr: back to .grad.
void set_grad_sink(const Tensor& leaf, GradSink sink);
// Writes rows [row0, row0 + dst.size(0)) of gradient g (viewed as [g.size(0), numel / g.size(0)])
// into dst of that row length, converting: a row gradient makes only those rows (`rows` of
// adding_grad), a dense one is copied.
void write_grad_rows(const Tensor& g, Tensor& dst, int64_t row0);

// Sparse gradients: mark a [V, C] leaf; ag::embedding then merges the rows it touches into
// touched_rows(leaf) (sorted, distinct) until clear_touched_rows (the engine does, per step).
void set_sparse_grad(const Tensor& leaf, bool on);
bool sparse_grad(const Tensor& leaf);
void add_touched_rows(const Tensor& leaf, const std::vector<int32_t>& rows);
const std::vector<int32_t>& touched_rows(const Tensor& leaf);
void clear_touched_rows(const Tensor& leaf);

bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Turns recording on for a scope, even inside backward (activation checkpointing recomputes there).
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// A second handle on t's storage with its own (empty) autograd slot: saving an op's own output
// this way avoids a reference cycle output -> node -> output.
Tensor detached(const Tensor& t);

// Attaches a node to `out` when grad mode is on and some input requires grad; returns `out`.
Tensor record(Tensor out, std::vector<Tensor> inputs, const char* name, BackwardFn fn);

// During a backward pass, the gradient other uses of t have accumulated so far (a non-leaf's node
// slot, which the engine owns alone; a leaf's .grad where no sink or hook takes its gradients, as
// an activation checkpoint's block input): a backward may add its contribution there in place and
// return none for t (Note [fused residual norms] in zt/ops/transformer.h). nullptr where no
// gradient has reached t yet, or it must go through the engine.
Tensor* accumulated_grad(const Tensor& t);

// Runs reverse mode from `root`; grad_root defaults to ones (root must then have 1 element).
// Saved state is released as nodes finish, so the graph can be used only once.
void backward(const Tensor& root, Tensor grad_root = {});

// Identity in forward; calls `fn` when the gradient reaches this point in backward (before
// the ops that produced x run backward). ZeRO-3 gathers a unit's parameters here.
Tensor on_backward(const Tensor& x, std::function<void()> fn);

// Note [row gradients]: a gradient a backward returns without its values, only `add` (slot +=
// it, any float slot dtype): an embedding's, which touches a few rows of [V, C], or a large
// weight's made a block of rows at a time (Note [weight gradients in row blocks], ops.h).
// Accumulating it calls add on the slot (a zeroed one first if there is none), never making
// the dense tensor; `zeroed` tells add that the slot holds no gradient yet: add must define all of it.
// `rows`, where given, makes any range of the gradient's rows alone (write_grad_rows).
Tensor adding_grad(const Shape& shape, DType dtype, Device device, std::function<void(Tensor& slot, bool zeroed)> add,
                   GradRows rows = nullptr);

}  // namespace autograd
}  // namespace zt
