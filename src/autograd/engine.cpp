#include <algorithm>
#include <atomic>
#include <unordered_map>

#include "zt/autograd/autograd.h"
#include "zt/ops/ops.h"

namespace zt::autograd {

namespace {
thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_seq{0};

AutogradMeta& meta(const Tensor& t) {
  ZT_CHECK(t.defined(), "[autograd] undefined tensor");
  auto& m = t.impl()->autograd;
  if (!m) m = std::make_shared<AutogradMeta>();
  return *m;
}
const AutogradMeta* meta_if(const Tensor& t) { return t.defined() ? t.impl()->autograd.get() : nullptr; }

// Note [first gradient taken]: an activation's first gradient is taken as the slot itself
// when nothing else holds it or its memory (the backward made it and handed it over whole,
// contiguous, under the slot's tag); otherwise it is copied, as a later add_ would write into
// memory another gradient or saved tensor shares.
bool can_take(const Tensor& g, MemTag tag) {
  if (!g.defined() || !g.has_storage() || g.impl()->autograd) return false;
  const auto& st = g.storage();
  return g.impl_ptr().use_count() == 1 && st.use_count() == 1 && st->tag() == tag && g.is_contiguous() &&
         g.offset() == 0 && size_t(g.numel()) * dtype_size(g.dtype()) == st->bytes() &&
         &st->allocator() == &allocator_for(g.device());
}

// slot += g; `zeroed`: slot holds no gradient yet (zeros or stale), so g is written instead.
void accumulate(Tensor& slot, const Tensor& g, MemTag tag, bool zeroed = false) {
  if (const AutogradMeta* gm = meta_if(g); gm && gm->add_into) {  // Note [row gradients]
    if (!slot.defined()) {
      TagScope scope(tag);
      slot = Tensor::zeros(g.shape(), g.dtype(), g.device());
      zeroed = true;
    }
    ZT_CHECK(slot.shape() == g.shape(), "[autograd] gradient shape ", shape_str(g.shape()), " does not match ",
             shape_str(slot.shape()));
    gm->add_into(slot, zeroed);
    return;
  }
  if (!slot.defined()) {
    slot = g.clone(tag);
  } else {
    ZT_CHECK(slot.shape() == g.shape(), "[autograd] gradient shape ", shape_str(g.shape()), " does not match ",
             shape_str(slot.shape()));
    if (zeroed && slot.is_contiguous())
      ops::cast_into(slot, g);  // 0 + g rounded once
    else if (zeroed)
      slot.copy_(g);  // converts and follows strides
    else if (slot.dtype() == g.dtype())
      ops::add_(slot, g);
    else
      ops::axpy_(slot, 1.f, g);
  }
}

// A leaf's gradient into its .grad (its slot hook may make a zeroed bucket view first).
void accumulate_leaf(const Tensor& leaf, AutogradMeta& m, const Tensor& g) {
  if (m.grad_sink) {
    m.grad_sink(leaf, g);
    return;
  }
  if (!m.grad.defined() && m.grad_slot_hook) m.grad_slot_hook(leaf);
  accumulate(m.grad, g, MemTag::grad, m.grad_zeroed);
  m.grad_zeroed = false;
}
}  // namespace

bool requires_grad(const Tensor& t) {
  auto* m = meta_if(t);
  return m && (m->requires_grad || m->grad_fn);
}
void set_requires_grad(const Tensor& t, bool on) { meta(t).requires_grad = on; }
Tensor grad(const Tensor& t) {
  auto* m = meta_if(t);
  return m ? m->grad : Tensor();
}
void set_grad(const Tensor& t, Tensor g, bool zeroed) {
  AutogradMeta& m = meta(t);
  m.grad = std::move(g);
  m.grad_zeroed = zeroed && m.grad.defined();
}
void mark_grad_zeroed(const Tensor& t) {
  AutogradMeta& m = meta(t);
  m.grad_zeroed = m.grad.defined();
}
bool grad_zeroed(const Tensor& t) {
  auto* m = meta_if(t);
  return m && m->grad_zeroed;
}
bool is_leaf(const Tensor& t) {
  auto* m = meta_if(t);
  return !m || !m->grad_fn;
}
void add_grad_ready_hook(const Tensor& leaf, GradHook hook) { meta(leaf).grad_ready_hooks.push_back(std::move(hook)); }
void clear_grad_ready_hooks(const Tensor& leaf) { meta(leaf).grad_ready_hooks.clear(); }
void set_grad_slot_hook(const Tensor& leaf, GradSlotHook hook) { meta(leaf).grad_slot_hook = std::move(hook); }
void set_grad_partial_hook(const Tensor& leaf, GradPartialHook hook) { meta(leaf).grad_partial_hook = std::move(hook); }

void set_grad_sink(const Tensor& leaf, GradSink sink) { meta(leaf).grad_sink = std::move(sink); }

void write_grad_rows(const Tensor& g, Tensor& dst, int64_t row0) {
  ZT_CHECK(g.dim() >= 1 && g.size(0) > 0, "[autograd] gradient rows of a tensor of shape ", shape_str(g.shape()));
  const int64_t rows = g.size(0), row_len = g.numel() / rows;
  ZT_CHECK(dst.dim() == 2 && dst.size(1) == row_len && row0 >= 0 && row0 + dst.size(0) <= rows, "[autograd] rows ",
           row0, "..", row0 + (dst.dim() == 2 ? dst.size(0) : 0), " of a gradient ", shape_str(g.shape()), " into ",
           shape_str(dst.shape()));
  if (const AutogradMeta* gm = meta_if(g); gm && gm->add_into) {
    ZT_CHECK(gm->rows != nullptr, "[autograd] this row gradient cannot make a range of its rows alone");
    gm->rows(dst, row0);
    return;
  }
  dst.copy_(g.contiguous().view({rows, row_len}).slice(0, row0, row0 + dst.size(0)));
}

void set_sparse_grad(const Tensor& leaf, bool on) { meta(leaf).sparse_grad = on; }
bool sparse_grad(const Tensor& leaf) {
  const AutogradMeta* m = meta_if(leaf);
  return m && m->sparse_grad;
}
void add_touched_rows(const Tensor& leaf, const std::vector<int32_t>& rows) {
  auto& have = meta(leaf).touched_rows;
  std::vector<int32_t> merged;
  merged.reserve(have.size() + rows.size());
  std::set_union(have.begin(), have.end(), rows.begin(), rows.end(), std::back_inserter(merged));
  have = std::move(merged);
}
const std::vector<int32_t>& touched_rows(const Tensor& leaf) { return meta(leaf).touched_rows; }
void clear_touched_rows(const Tensor& leaf) { meta(leaf).touched_rows.clear(); }

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = prev_; }
EnableGradGuard::EnableGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { t_grad_enabled = prev_; }

Tensor detached(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>(*t.impl());
  impl->autograd.reset();
  return Tensor(std::move(impl));
}

Tensor record(Tensor out, std::vector<Tensor> inputs, const char* name, BackwardFn fn) {
  if (!t_grad_enabled) return out;
  bool any = false;
  for (auto& in : inputs) any = any || requires_grad(in);
  if (!any) return out;
  auto node = std::make_shared<Node>();
  node->seq = ++g_seq;
  node->name = name;
  node->inputs = std::move(inputs);
  node->backward = std::move(fn);
  meta(out).grad_fn = std::move(node);
  return out;
}

Tensor* accumulated_grad(const Tensor& t) {
  AutogradMeta* m = t.defined() ? t.impl()->autograd.get() : nullptr;
  if (!m) return nullptr;
  if (m->grad_fn) return m->grad_fn->grad.defined() ? &m->grad_fn->grad : nullptr;
  // A leaf's .grad where accumulate_leaf would add to it in place as it stands (an activation
  // checkpoint's block input): not stale, and no sink or hook that wants each gradient itself.
  const bool plain = m->requires_grad && m->grad.defined() && !m->grad_zeroed && !m->grad_sink &&
                     !m->grad_slot_hook && !m->grad_partial_hook && m->grad.dtype() == t.dtype();
  return plain ? &m->grad : nullptr;
}

void backward(const Tensor& root, Tensor grad_root) {
  auto* rm = meta_if(root);
  ZT_CHECK(rm && (rm->grad_fn || rm->requires_grad), "[backward] tensor does not require grad");
  if (!grad_root.defined()) {
    ZT_CHECK(root.numel() == 1, "[backward] implicit gradient needs a 1-element tensor, got shape ",
             shape_str(root.shape()));
    grad_root = Tensor::full(root.shape(), 1.f, root.dtype(), root.device());
  }
  NoGradGuard no_grad;  // backward itself is not recorded
  if (!rm->grad_fn) {   // root is a leaf
    Tensor r = root;
    accumulate_leaf(r, meta(r), grad_root);
    for (auto& h : meta(r).grad_ready_hooks) h(r);
    return;
  }
  // Collect reachable nodes and count how many edges feed each leaf.
  std::vector<Node*> nodes;
  std::vector<std::shared_ptr<Node>> keep;  // nodes must outlive the release of saved inputs
  std::unordered_map<TensorImpl*, int> leaf_pending;
  std::vector<Node*> stack{rm->grad_fn.get()};
  std::unordered_map<Node*, bool> seen{{rm->grad_fn.get(), true}};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    nodes.push_back(n);
    for (auto& in : n->inputs) {
      auto* m = meta_if(in);
      if (!m) continue;
      if (m->grad_fn) {
        if (!seen[m->grad_fn.get()]) {
          seen[m->grad_fn.get()] = true;
          keep.push_back(m->grad_fn);
          stack.push_back(m->grad_fn.get());
        }
      } else if (m->requires_grad) {
        ++leaf_pending[in.impl()];
      }
    }
  }
  std::sort(nodes.begin(), nodes.end(), [](Node* a, Node* b) { return a->seq > b->seq; });
  rm->grad_fn->grad = grad_root;
  for (Node* n : nodes) {
    // A node no gradient reached still passes "none" on, so leaf hooks fire.
    std::vector<Tensor> grads = n->grad.defined() ? n->backward(n->grad) : std::vector<Tensor>(n->inputs.size());
    ZT_ASSERT(grads.size() == n->inputs.size(), "node ", n->name, " returned ", grads.size(), " gradients for ",
              n->inputs.size(), " inputs");
    n->grad = Tensor();
    // Last input first: a module's parameters (weight, then bias) are final in reverse order, as
    // backward's order over the model, which gradient buckets are cut by (Note [step schedule]).
    for (size_t i = grads.size(); i-- > 0;) {
      Tensor& in = n->inputs[i];
      auto* m = in.defined() ? in.impl()->autograd.get() : nullptr;
      if (!m) continue;
      if (m->grad_fn) {
        if (!m->grad_fn->grad.defined() && can_take(grads[i], current_tag()))  // Note [first gradient taken]
          m->grad_fn->grad = std::move(grads[i]);
        else if (grads[i].defined())
          accumulate(m->grad_fn->grad, grads[i], current_tag());
      } else if (m->requires_grad) {
        if (grads[i].defined()) accumulate_leaf(in, *m, grads[i]);
        if (const int left = --leaf_pending[in.impl()]; left == 0) {
          for (auto& h : m->grad_ready_hooks) h(in);
        } else if (grads[i].defined() && m->grad_partial_hook) {
          m->grad_partial_hook(in, left);
        }
      }
    }
    n->inputs.clear();  // release saved tensors early
    n->backward = nullptr;
  }
}

Tensor adding_grad(const Shape& shape, DType dtype, Device device, std::function<void(Tensor& slot, bool zeroed)> add,
                   GradRows rows) {
  Tensor g = Tensor::unallocated(shape, dtype, device);
  meta(g).add_into = std::move(add);
  meta(g).rows = std::move(rows);
  return g;
}

Tensor on_backward(const Tensor& x, std::function<void()> fn) {
  return record(detached(x), {x}, "on_backward", [fn = std::move(fn)](const Tensor& g) {
    fn();
    return std::vector<Tensor>{g};
  });
}

}  // namespace zt::autograd
