#include "model_layout.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "zt/autograd/autograd.h"
#include "zt/ops/ops.h"
#include "zt/optim/optimizer.h"

namespace zt::zero {

namespace {
// sparse_gradients: the weights of "Embedding" modules registered nowhere else (sparse), and
// those another module uses too (tied: GPT-2's wte is also lm_head's), whose other use gives
// dense rows, so only the embedding's own part can travel as rows (Note [tied rows]). Shared:
// any parameter of several modules (Note [step schedule]: its gradient starts at the first).
struct SparseEligible {
  std::vector<bool> sparse, tied, shared;
};
SparseEligible sparse_eligible(nn::Module& model, const std::vector<Tensor>& params) {
  std::unordered_map<TensorImpl*, int> uses;
  std::unordered_set<TensorImpl*> embedding;
  for (nn::Module* m : model.parameter_owners())
    for (auto& [n, p] : m->own_parameters()) {
      ++uses[p.impl()];
      if (std::string(m->type_name()) == "Embedding" && p.dim() == 2) embedding.insert(p.impl());
    }
  SparseEligible out;
  for (auto& p : params) {
    const bool e = embedding.count(p.impl()) > 0;
    out.sparse.push_back(e && uses[p.impl()] == 1);
    out.tied.push_back(e && uses[p.impl()] > 1);
    out.shared.push_back(uses[p.impl()] > 1);
  }
  return out;
}
}  // namespace

ModelLayout layout_model(nn::Module& model, const EngineOptions& opts) {
  ModelLayout m;
  m.policy = make_policy(opts.zero.stage, opts.dtype, opts.grad_accum_dtype, opts.communication_data_type);
  m.policy.device = opts.device;
  if (opts.f32_compute) m.policy.compute_dtype = DType::f32;
  set_placement(m.policy, placement_of(opts), opts.zero, opts.aio, opts.run_name);
  m.policy.snapshot_host_update = !opts.device.is_cpu() && m.policy.optimizer_medium() == Medium::host &&
                                  m.policy.param_medium() != Medium::files &&
                                  opts.zero.offload_optimizer.super_offload &&
                                  (opts.gradient_clipping > 0 || m.policy.loss_scaling);
  m.policy.grads_to_host = !opts.device.is_cpu() && m.policy.optimizer_medium() != Medium::compute &&
                           m.policy.shard_gradients() && opts.gradient_accumulation_steps == 1 &&
                           m.policy.comm_dtype == m.policy.grad_accum_dtype;
  ZT_CHECK_AS(ErrorKind::config, m.policy.param_medium() == Medium::compute || opts.zero.stage == 3,
              "[zero] offload_param.device = ", offload_device(m.policy.param_residence),
              " needs zero_optimization.stage 3 (below it every rank holds all ", "parameters), got stage ",
              opts.zero.stage);
  std::unordered_set<TensorImpl*> seen;
  std::unordered_map<TensorImpl*, size_t> index;
  for (auto& [name, p] : model.named_parameters()) {
    if (!seen.insert(p.impl()).second) continue;
    ZT_CHECK(p.dtype() == DType::f32, "[zero] parameter ", name, " is ", dtype_name(p.dtype()),
             "; models are built in f32 and the engine casts them");
    if (!autograd::requires_grad(p)) {
      m.frozen.push_back(p);
      m.frozen_names.push_back(name);
      continue;
    }
    index[p.impl()] = m.params.size();
    m.params.push_back(p);
    m.names.push_back(name);
  }
  ZT_CHECK(!m.params.empty(), "[zero] the model has no trainable parameters");
  for (auto& p : m.params) {
    m.input.numels.push_back(p.numel());
    m.input.row_elems.push_back(p.dim() > 0 && p.size(0) > 0 ? p.numel() / p.size(0) : 1);
  }
  SparseEligible e = sparse_eligible(model, m.params);
  m.input.shared = std::move(e.shared);
  if (opts.sparse_gradients) {
    m.input.sparse = std::move(e.sparse);
    m.input.tied_rows = std::move(e.tied);
  }
  m.input.optim_state_bytes_per_elem = optim::state_bytes_per_elem(opts.optimizer);
  m.input.reduce_bucket_size = opts.zero.reduce_bucket_size;
  m.input.persistence_threshold = opts.zero.stage3_param_persistence_threshold;
  if (!m.policy.shard_parameters()) return m;
  std::unordered_map<TensorImpl*, size_t> owner;  // parameter -> buffer of its first unit
  std::vector<std::pair<nn::Module*, std::vector<TensorImpl*>>> shared;
  for (nn::Module* u : model.zero_units()) {
    std::vector<size_t> members;
    std::vector<TensorImpl*> others;
    for (auto& [n, p] : u->unit_parameters()) {
      auto it = index.find(p.impl());
      if (it == index.end()) continue;  // frozen
      if (!seen.erase(p.impl())) {      // already in an earlier unit (or twice in this one)
        others.push_back(p.impl());
        continue;
      }
      owner[p.impl()] = m.units.size();
      members.push_back(it->second);
    }
    if (!others.empty()) shared.emplace_back(u, std::move(others));
    if (members.empty()) continue;
    m.units.push_back(u);
    m.input.units.push_back(std::move(members));
  }
  for (auto& [u, impls] : shared) {
    Borrower b{u, {}};
    for (TensorImpl* t : impls) {
      const size_t buf = owner.at(t);
      const bool own = buf < m.units.size() && m.units[buf] == u;
      if (!own && std::find(b.buffers.begin(), b.buffers.end(), buf) == b.buffers.end()) b.buffers.push_back(buf);
    }
    if (!b.buffers.empty()) m.borrowers.push_back(std::move(b));
  }
  return m;
}

Materialize initial_values(const nn::Module& model, const std::string& component) {
  auto inits = std::make_shared<const std::unordered_map<const TensorImpl*, nn::Init>>(model.deferred_initializers());
  // The values a parameter holds now (an eager model, imported weights); the others are their
  // initialiser's, whenever asked (Note [fresh swap files]: after the engine has bound them too).
  auto held = std::make_shared<std::unordered_set<const TensorImpl*>>();
  for (const Tensor& p : model.parameters())
    if (p.has_storage()) held->insert(p.impl());
  return [inits, held, component](const Tensor& p, int64_t begin, Tensor dst) {
    const int64_t n = dst.numel();
    if (dst.device().type == DeviceType::meta) return;  // nothing is stored there (Note [meta device])
    ZT_ASSERT(begin >= 0 && begin + n <= p.numel(), "initial values [", begin, ", ", begin + n, ") of a parameter of ",
              p.numel());
    if (held->count(p.impl())) {
      ZT_ASSERT(p.has_storage(), "the held values of a parameter of ", p.numel(), " are gone");
      ops::cast_into(dst, p.reshape({p.numel()}).slice(0, begin, begin + n).to(dst.device()));
      return;
    }
    auto it = inits->find(p.impl());
    ZT_CHECK(it != inits->end(), component, " a parameter of shape ", shape_str(p.shape()),
             " has no values and no initialiser");
    if (dst.device().is_cpu() && dst.dtype() == DType::f32 && dst.is_contiguous()) {
      nn::run_init(it->second, dst, begin);
      return;
    }
    const int64_t chunk = std::min<int64_t>(n, int64_t(1) << 22);  // 16 MiB of f32 at most
    TagScope tag(MemTag::workspace);
    Tensor values = Tensor::empty({chunk}, DType::f32);
    for (int64_t at = 0; at < n; at += chunk) {
      const int64_t m = std::min(chunk, n - at);
      Tensor piece = values.slice(0, 0, m), part = dst.slice(0, at, at + m);
      nn::run_init(it->second, piece, begin + at);
      ops::cast_into(part, piece.to(dst.device()));
    }
  };
}

Plan plan_model(nn::Module& model, const EngineOptions& opts, int world, int local_size) {
  ModelLayout m = layout_model(model, opts);
  m.policy.wire = plan_wire(opts.zero, world, local_size);
  return make_plan(m.input, m.policy, world);
}

}  // namespace zt::zero
