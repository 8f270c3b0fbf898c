// Note [measured activations] (dry_run.h).
#include "dry_run.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "models/model_kind.h"
#include "session.h"
#include "tasks.h"
#include "zt/autograd/autograd.h"
#include "zt/comm/group.h"
#include "zt/core/allocator.h"
#include "zt/zero/engine.h"

namespace zt::apps {

namespace {

// The run's engine on one rank of the meta device: its stage, buckets, dtypes and checkpointing,
// nothing offloaded and no ZeRO++ (those move model states and collectives, not activations).
// A parameter server's workers keep their gradients as stages 0-1 do.
zero::EngineOptions dry_options(const config::Config& c, const DryRunShape& s) {
  // Two micro-batches show what accumulating keeps between them; more repeat the second.
  const int64_t micro_batches = std::min<int64_t>(s.accumulation, 2);
  zero::EngineOptions o = engine_options(c, config::BatchSizes{s.micro * micro_batches, s.micro, micro_batches});
  o.device = Device::meta();
  o.f32_compute = s.f32_compute;
  o.zero.stage = c.run.strategy == "zero" ? s.stage : 0;
  if (s.reduce_bucket_size > 0) o.zero.reduce_bucket_size = s.reduce_bucket_size;
  o.zero.offload_optimizer = {};
  o.zero.offload_param = {};
  o.zero.zero_quantized_weights = o.zero.zero_quantized_gradients = false;
  o.zero.zero_hpz_partition_size = 1;
  return o;
}

// A micro-batch of n samples on the meta device: the entry's example, its values never read there.
MicroBatch on_meta(const MicroBatch& host) {
  MicroBatch b = host;
  for (Tensor& t : b.inputs) t = t.to(Device::meta());
  b.targets = b.targets.to(Device::meta());
  return b;
}

// The allocator's cache is emptied first: the activation tag's resident peak (its bytes in use plus
// the blocks it freed and the cache still holds) is then the step's own.
MeasuredActivations measure(const config::Config& c, const DryRunShape& s) {
  const ModelKind& kind = model_kind(c);
  Allocator& meta = allocator_for(Device::meta());
  auto model = build_model(c, /*deferred=*/true);
  // Past 2^36 parameters (no machine here trains one) the dry run's host work, which grows with the
  // gradient rounds of each weight, would take minutes: such a plan counts no activations.
  if (model->num_parameters() > (int64_t(1) << 36)) return {};
  const zero::EngineOptions opts = dry_options(c, s);
  zero::Engine engine(*model, comm::make_group("local"), opts);
  meta.release_cached();
  meta.reset_peaks();
  for (int64_t k = 0; k < opts.gradient_accumulation_steps; ++k) {
    const MicroBatch b = on_meta(kind.example(c, s.micro));
    engine.backward(Task::cross_entropy(engine.forward(b.inputs), b.targets));
  }
  engine.step(c.optimizer.lr);
  MeasuredActivations m;
  m.peak = int64_t(meta.stats().peak_of(MemTag::activation));
  int64_t resident = int64_t(meta.stats().resident_peak[size_t(MemTag::activation)]);
  if (s.eval_batch > 0) {
    autograd::NoGradGuard no_grad;
    meta.reset_peaks();
    const MicroBatch b = on_meta(kind.example(c, s.eval_batch));
    (void)Task::cross_entropy(engine.forward(b.inputs), b.targets);
    m.peak = std::max(m.peak, int64_t(meta.stats().peak_of(MemTag::activation)));
    resident = std::max(resident, int64_t(meta.stats().resident_peak[size_t(MemTag::activation)]));
  }
  m.resident = std::max(m.peak, resident);
  return m;
}

}  // namespace

MeasuredActivations measure_activations(const config::Config& c, const DryRunShape& s) {
  // What the measurement depends on: the validated config, the checkpointing a plan may switch, the shape.
  const std::string key = c.raw.dump() + "|" + std::to_string(c.activation_checkpointing.enabled) + "|" +
                          std::to_string(c.activation_checkpointing.number_checkpoints) + "|" +
                          std::to_string(s.micro) + "|" + std::to_string(s.accumulation) + "|" +
                          std::to_string(s.eval_batch) + "|" + std::to_string(s.f32_compute) + "|" +
                          std::to_string(s.stage) + "|" + std::to_string(s.reduce_bucket_size);
  static std::mutex mu;
  static std::map<std::string, MeasuredActivations> measured;
  std::lock_guard<std::mutex> lock(mu);
  auto it = measured.find(key);
  if (it == measured.end()) it = measured.emplace(key, measure(c, s)).first;
  return it->second;
}

}  // namespace zt::apps
