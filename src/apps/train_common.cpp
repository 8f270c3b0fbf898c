// Helpers of the training loops (train_common.h).
#include "train_common.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "memory_plan.h"
#include "models/model_kind.h"
#include "session.h"
#include "step_cost.h"
#include "zt/autograd/functions.h"
#include "zt/core/affinity.h"
#include "zt/core/allocator.h"
#include "zt/core/atomic_file.h"
#include "zt/core/parallel.h"
#include "zt/core/sha256.h"
#include "zt/core/splitmix.h"
#include "zt/data/mnist.h"
#include "zt/nn/transformer.h"
#include "zt/ops/ops.h"

namespace zt::apps {

std::string pick_threads(const config::Config& c) {
  const LocalRank local = local_rank_from_env();
  // OMP_NUM_THREADS, where set, is the default a run.threads of 0 takes, as OpenMP's programs do.
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const int omp_threads = omp && *omp ? std::atoi(omp) : 0;
  const ThreadChoice chosen = c.run.threads > 0 ? ThreadChoice{c.run.threads, ""}
                              : omp_threads > 0 ? ThreadChoice{omp_threads, "OMP_NUM_THREADS"}
                                                : choose_threads(cpu_view(), local.bound, local.size);
  set_num_threads(chosen.threads);
  std::string n = std::to_string(num_threads()) + (num_threads() == 1 ? " thread" : " threads");
  if (!chosen.note.empty()) n += " (" + chosen.note + ")";
  if (!c.run.pin_threads) return n + ", not pinned (run.pin_threads = false)";
  return n + ", " + pin_threads(local.rank, local.size, num_threads(), local.bound).note;
}

void stop_if_voted(const Vote& v, const LeadWork& lead, const std::string& when, const std::string& dir,
                   bool before_commit, const std::string& checkpoint) {
  const std::string unchanged = "model.safetensors and summary.json in " + dir + " are unchanged";
  const std::string kept = !before_commit       ? ""
                           : checkpoint.empty() ? "; nothing from this run was saved (" + unchanged + ")"
                                                : "; " + unchanged + "; this run's last checkpoint is " + checkpoint;
  train::stop_if_voted(v, when, kept, lead.error, lead.kind);
}

void check_finite(const std::string& name, const Tensor& t, int64_t steps) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    ZT_CHECK_AS(ErrorKind::config, std::isfinite(p[i]), "[train] the weights after step ", steps, " are not finite ('",
                name, "' holds ", p[i], "): training diverged (lower optimizer.params.lr or set gradient_clipping)");
}

uint64_t dropout_stream_seed(uint64_t seed, int64_t step, int64_t micro) {
  return splitmix64(seed ^ splitmix64(uint64_t(step) ^ splitmix64(uint64_t(micro))));
}

int64_t steps_for_epochs(double epochs, int64_t steps_per_epoch) {
  const double steps = std::round(epochs * double(steps_per_epoch));
  ZT_CHECK_AS(ErrorKind::config, std::isfinite(steps) && steps < 9.2e18, "[config] 'run.epochs' = ", epochs, " at ",
              steps_per_epoch, " steps per epoch gives more steps than int64 can count");
  return std::max<int64_t>(1, int64_t(steps));
}

// Note [16-bit products]: the model's largest
// 2-D weight with both sides at most 16384 (not a vocabulary-sized table: its timing would be
// long and its f32 copies would set the process's peak before the plan measures it) at one
// micro-batch's rows, fewer where the product is larger than 256x768x3072 (~0.1 s).
zero::ProductShape product_shape(const config::Config& c, const nn::Module& model, int64_t micro) {
  const int64_t per_sample = model_kind(c).rows_per_sample(c);
  zero::ProductShape s;
  int64_t best = 0;
  for (const auto& [name, p] : model.named_parameters())
    if (p.dim() == 2 && p.numel() > best && p.size(0) <= 16384 && p.size(1) <= 16384) {
      best = p.numel();
      s.out = p.size(0);
      s.in = p.size(1);
    }
  const int64_t cap = std::max<int64_t>(16, int64_t(256) * 768 * 3072 / std::max<int64_t>(1, s.in * s.out));
  s.rows = std::clamp<int64_t>(micro * per_sample, 1, cap);
  return s;
}

std::string processor_note() {
  const ops::CpuIsa& isa = ops::cpu_isa();
  return "processor " + isa.name + (isa.cap.empty() ? "" : " (capped by ONEDNN_MAX_CPU_ISA=" + isa.cap + ")");
}

std::string overflow_advice(const config::Fp16Config& f) {
  if (f.loss_scale > 0)
    return detail::concat("lower fp16.loss_scale (a static ", f.loss_scale,
                          "), or set it to 0 for dynamic loss scaling");
  return detail::concat("the scale is dynamic already: lower fp16.initial_scale_power (", f.initial_scale_power,
                        ") or fp16.min_loss_scale (", f.min_loss_scale,
                        "), or look for values fp16 cannot hold (learning rate, inputs), or train in bf16");
}

nlohmann::json processor_record() {
  const ops::CpuIsa& isa = ops::cpu_isa();
  return {
      {"isa", isa.name}, {"cap", isa.cap.empty() ? nlohmann::json() : nlohmann::json(isa.cap)}, {"avx512", isa.avx512}};
}

nlohmann::json products_record(const std::optional<zero::ProductsChoice>& p, DType dt, bool f32_compute) {
  if (!p) return nullptr;
  nlohmann::json r = {{"dtype", dtype_name(dt)},
                      {"path", ops::products_name(p->products)},
                      {"setting", p->setting},
                      {"reason", p->reason},
                      {"amx", p->amx},
                      {"shape", {p->shape.rows, p->shape.in, p->shape.out}},
                      {"f32_compute", f32_compute}};
  if (p->native_ms > 0) r["measured_ms"] = {{"native", p->native_ms}, {"f32", p->f32_ms}};
  return r;
}

void add_memory_fields(nlohmann::json& rec, Device device) {
  // Per tag, now and at the peak: the host's allocator as "memory", a device's as "device_memory",
  // pinned host memory's as "pinned_memory".
  auto fields = [&rec](const MemStats& ms, const std::string& prefix) {
    nlohmann::json mem, mem_peak;
    for (size_t t = 0; t < kNumMemTags; ++t) {
      mem[mem_tag_name(MemTag(t))] = ms.current[t];
      mem_peak[mem_tag_name(MemTag(t))] = ms.peak[t];  // activation: what checkpointing saves
    }
    mem["peak"] = ms.total_peak;
    mem["cached"] = ms.cached;  // freed blocks kept for reuse: resident beside the tags
    rec[prefix + "memory"] = mem;
    rec[prefix + "memory_peak"] = mem_peak;
  };
  fields(Allocator::global().stats(), "");
  if (!device.is_cpu()) {
    fields(allocator_for(device).stats(), "device_");
    fields(pinned_host_allocator().stats(), "pinned_");  // ZeRO-Offload's states and staging shards
    rec["device"] = device.str();
  }
  rec["rss_peak"] = read_rss().peak;  // VmHWM: the OS's view of memory_plan
}

std::unique_ptr<Task> load_task_agreed(const config::Config& cfg, comm::Group& group, bool read) {
  std::unique_ptr<Task> task;
  std::string error;
  ErrorKind kind = ErrorKind::data;
  try {
    if (read) task = make_task(cfg);
  } catch (const Error& e) {
    error = e.what();
    kind = e.kind();
  } catch (const std::exception& e) {
    error = e.what();
  }
  comm::agree_on_error(group, error, "reading the data", kind);
  return task;
}

RunLength run_length(const config::Config& cfg, const config::BatchSizes& bs, int64_t train_size) {
  RunLength r;
  r.steps_per_epoch = train_size / bs.train_batch_size;
  ZT_CHECK_AS(ErrorKind::config, r.steps_per_epoch > 0, "[train] train_batch_size ", bs.train_batch_size,
              " exceeds the ", train_size, " training samples");
  r.total_steps = cfg.run.max_steps > 0 ? cfg.run.max_steps : steps_for_epochs(cfg.run.epochs, r.steps_per_epoch);
  return r;
}

std::shared_ptr<nn::Module> model_to_train(const config::Config& cfg, bool say) {
  auto model = build_model(cfg, /*deferred=*/cfg.model.init_from.empty());
  if (!cfg.model.init_from.empty()) {
    const std::string what = load_weights(cfg, *model, cfg.model.init_from, say);
    if (say) std::fprintf(stderr, "zerotrain: model.init_from: %s\n", what.c_str());
  }
  return model;
}

MicroBatch gather_micro_batch(const Task& task, const std::vector<int64_t>& order, const config::BatchSizes& bs,
                              StepPlace at, int64_t m, int ranks, int rank) {
  const int64_t begin = micro_begin(bs, at.in_epoch, m, ranks, rank);
  return task.gather(order, begin, begin + bs.micro, at.epoch);
}

double train_micro_batches(const Task& task, const std::vector<int64_t>& order, const config::BatchSizes& bs,
                           uint64_t seed, StepPlace at, int ranks, int rank,
                           const std::function<MicroBatch(int64_t)>& take,
                           const std::function<Tensor(const std::vector<Tensor>&)>& forward,
                           const std::function<void(const Tensor&)>& backward) {
  // Each micro-batch's loss stays where it was computed until every backward is queued: on a
  // device the host reads them once, not between a forward and its backward.
  std::vector<Tensor> losses;
  const int64_t global_begin = at.in_epoch * bs.train_batch_size;
  for (int64_t m = 0; m < bs.accumulation; ++m) {
    const int64_t begin = micro_begin(bs, at.in_epoch, m, ranks, rank);
    MicroBatch b = take(m);
    nn::set_dropout_stream(dropout_stream_seed(seed, at.step, micro_index(m, ranks, rank)));
    Tensor loss = task.loss(forward(b.inputs), b);
    const double w =
        task.weight(order, begin, begin + bs.micro, global_begin, global_begin + bs.train_batch_size, at.epoch);
    if (w != 1.0) loss = ag::scale(loss, float(w));
    losses.push_back(loss.clone());
    backward(loss);
  }
  double step_loss = 0;
  for (const Tensor& l : losses) step_loss += l.item() / double(bs.accumulation);
  return step_loss;
}

StepBatches::StepBatches(const Task& task, const config::BatchSizes& bs, Run run, Device device)
    : task_(task), bs_(bs), run_(run) {
  if (!device.is_cpu()) prefetch_.emplace(device, [this](BatchKey k) { return gather(k); });
}

StepPlace StepBatches::place(int64_t step) const {
  return {step, step / run_.steps_per_epoch, step % run_.steps_per_epoch};
}

const std::vector<int64_t>& StepBatches::order(int64_t epoch) {
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  if (orders_.size() >= 2) orders_.erase(orders_.begin());  // the one before the current epoch
  return orders_.emplace(epoch, data::epoch_order(task_.train_size(), run_.seed, epoch, run_.shuffle)).first->second;
}

MicroBatch StepBatches::gather(BatchKey key) {
  const StepPlace at = place(key.step);
  return gather_micro_batch(task_, order(at.epoch), bs_, at, key.micro, run_.ranks, run_.rank);
}

MicroBatch StepBatches::take(StepPlace at, int64_t m) {
  if (!prefetch_) return gather({at.step, m});
  std::optional<BatchKey> next;
  if (m + 1 < bs_.accumulation)
    next = BatchKey{at.step, m + 1};
  else if (at.step + 1 < run_.total_steps)
    next = BatchKey{at.step + 1, 0};
  return prefetch_->take({at.step, m}, next);
}

std::optional<EvalResult> eval_at_end(const config::Config& cfg, const std::function<EvalResult(bool)>& pass,
                                      LeadWork& on_lead, std::unique_ptr<RunDir>& run_dir, int64_t steps) {
  if (!cfg.run.eval_at_end) return std::nullopt;
  EvalResult r = pass(/*whole=*/true);
  if (cfg.data.eval_every > 0) {
    nlohmann::json rec = r.metrics;
    rec["step"] = steps;
    on_lead([&] { run_dir->append_metrics(rec); });
  }
  return r;
}

// The tokenizer prepare's manifest names (its files, sha256-checked) beside the weights, as a
// Hugging Face folder keeps it, so generate and eval on the run folder find it there. A tokenizer
// that moved or changed since prepare leaves the run folder without one, said in one line.
void keep_tokenizer(const config::Config& cfg, RunDir& dir) {
  std::string problem;
  const std::vector<std::string> files = manifest_tokenizer_files(cfg, &problem);
  if (!problem.empty())
    std::fprintf(stderr, "zerotrain: %s; %s keeps no tokenizer\n", problem.c_str(), dir.dir().c_str());
  for (const std::string& path : files) {
    std::ifstream src(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(src)), {});
    write_file_atomic(dir.path(kept_tokenizer_name(path)), bytes, ErrorKind::checkpoint, "[run]");
  }
}

void finish_run(const config::Config& cfg, comm::Group& group, LeadWork& on_lead, std::unique_ptr<RunDir>& run_dir,
                FinalOutputs out) {
  if (out.final_eval) out.summary.update(out.final_eval->metrics);
  std::unique_ptr<RunDir::Staged> staged;
  on_lead([&] {
    if (out.before_stage) out.before_stage();
    std::vector<ckpt::TensorEntry> entries;
    for (auto& [name, shape] : out.shapes) entries.push_back({name, DType::f32, shape});
    staged = run_dir->begin_stage(std::move(entries), cfg.run.save_weights);
  });
  if (cfg.run.save_weights) {
    out.each([&](const std::string& n, const Tensor& p) {
      on_lead([&] {
        const Tensor w = ops::cast(p, DType::f32).to(Device::cpu());  // a device's weights come down
        check_finite(n, w, out.steps);
        staged->writer->write(n, w);
      });
    });
  }
  on_lead([&] { run_dir->finish_stage(*staged, out.summary); });
  stop_if_voted(agree(group, {stop_signal(), -1, on_lead.failed()}, "final save, outputs written"), on_lead,
                "before saving", cfg.run.dir);
  on_lead([&] {
    keep_tokenizer(cfg, *run_dir);
    run_dir->commit(*staged, {{"event", "final"}, {"summary", out.summary}});
  });
  stop_if_voted(agree(group, {0, -1, on_lead.failed()}, "final save, outputs committed"), on_lead, "", cfg.run.dir,
                false);
  if (on_lead.lead) {
    if (out.final_eval) std::printf("%s\n", out.final_eval->line.c_str());
    std::fprintf(stderr,
                 "zerotrain: trained %lld steps in %.1f s (start-up %.1f s, final evaluation %.1f s; the whole run "
                 "%.1f s); %s in %s\n",
                 (long long)out.steps, out.train_s, out.startup_s, out.eval_s, seconds_since_process_start(),
                 cfg.run.save_weights ? "weights and metrics" : "metrics (run.save_weights false)",
                 cfg.run.dir.c_str());
  }
}

}  // namespace zt::apps
