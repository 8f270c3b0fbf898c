// The ZeRO engine as a Trainer (Note [one training loop]): every rank reads the data and computes
// its share; the memory plan before step 1 (Note [peak memory]), resume from a checkpoint saved
// at any world size and stage, checkpoints in the foreground or the background (Note [background
// save]), and the engine's own fields in the records (overlap, gathers, swap, offload, sparse).
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "memory_plan.h"
#include "models/model_kind.h"
#include "session.h"
#include "trainer.h"
#include "zt/autograd/autograd.h"
#include "zt/ops/transformer.h"
#include "zt/train/checkpoints.h"
#include "zt/zero/engine.h"
#include "zt/zero/products.h"

namespace zt::apps {

namespace {

// What the offload sections mean for this run, for the start line ("" when nothing is offloaded).
std::string offload_note(const config::Config& c, const zero::Engine& e) {
  std::string out;
  if (c.zero.offload_optimizer.device == "cpu" && e.policy().device.is_cpu())
    out = "offload_optimizer: cpu, where a CPU run's fp32 master and optimizer states already are (host memory)";
  if (e.policy().optimizer_medium() == zero::Medium::host) {
    const zero::Plan& p = e.plan();
    const zero::MemoryEstimate m = p.memory();
    out = detail::concat("offload_optimizer: ", zero::offload_device(p.policy.optimizer_residence), " (ZeRO-Offload), ",
                         p.policy.fp32_master ? "fp32 master and " : "", "optimizer states in ",
                         zero::residence_name(p.policy.optimizer_residence), " (", format_bytes(size_t(m.master + m.optim)),
                         " per rank), updated by the host ",
                         p.policy.param_medium() == zero::Medium::files
                             ? "after backward (stage 3's parameter shards are in swap files)"
                         : c.gradient_clipping <= 0 && !c.fp16.enabled
                             ? "behind backward, each buffer as its gradient comes down"
                         : p.policy.snapshot_host_update
                             ? "behind backward, each buffer as its gradient comes down, speculating that nothing "
                               "clips or overflows (super_offload: a snapshot of the states to redo from; at the "
                               "step after a step that did)"
                             : "after backward, once the gradients' norm is known (gradient_clipping or fp16; "
                               "offload_optimizer.super_offload speculates behind backward)",
                         "; ", format_bytes(size_t(m.on_device())), " of model states per rank on ", p.policy.device);
  }
  if (e.policy().optimizer_medium() == zero::Medium::files) {
    const zero::Plan& p = e.plan();
    out = detail::concat("offload_optimizer: ", zero::offload_device(p.policy.optimizer_residence),
                         ", fp32 master and optimizer states in ", zero::residence_name(p.policy.optimizer_residence),
                         " under ",
                         p.policy.swap.dir, "/rank*/ (", e.swap_stats().direct ? "O_DIRECT" : "page cache", "), ",
                         p.swap_tile_elems(), "-element tiles through ", p.policy.swap.buffers, " buffers (",
                         format_bytes(size_t(p.memory().optim)), " in memory)");
  }
  std::string par;
  if (c.zero.offload_param.device == "cpu" && e.policy().device.is_cpu())
    par = "offload_param: cpu, where a CPU run's parameters already are";
  if (e.policy().param_medium() != zero::Medium::compute) {  // in swap files, or pinned beside a device
    const zero::Plan& p = e.plan();
    const bool file = p.policy.param_medium() == zero::Medium::files;
    int64_t bytes = 0, units = 0;
    for (size_t b = 0; b < p.buffers.size(); ++b)
      if (file ? p.param_swapped(b) : p.param_on_host(b)) {
        ++units;
        bytes += p.buffers[b].padded / p.world * int64_t(dtype_size(p.policy.param_dtype));
      }
    const zero::Residence r = p.policy.param_residence;
    const std::string shards = detail::concat("offload_param: ", zero::offload_device(r), ", the parameter shards of ",
                                              units, " of ", p.buffers.size(), " units in ", zero::residence_name(r));
    par = file ? detail::concat(shards, " under ", p.policy.swap.param_dir, "/rank*/ (", format_bytes(size_t(bytes)),
                                " per rank on disk, read ahead of each all-gather)")
               : detail::concat(shards, " (", format_bytes(size_t(bytes)), " per rank, uploaded for each all-gather)");
  }
  if (!par.empty()) out += (out.empty() ? "" : "; ") + par;
  // super_offload speculates only where the host would otherwise wait for the gradients' norm.
  const zero::Policy& pol = e.policy();
  if (c.zero.offload_optimizer.super_offload && !pol.snapshot_host_update) {
    const std::string why = pol.device.is_cpu() ? "a CPU run updates where it computes"
                            : pol.optimizer_medium() != zero::Medium::host
                                ? "the optimizer's states are not in pinned host memory (offload_optimizer.device cpu)"
                            : pol.param_medium() == zero::Medium::files
                                ? "stage 3's parameter shards are in swap files"
                                : "nothing clips or scales the gradients, so the "
                                  "host already updates behind backward";
    out += (out.empty() ? "" : "; ") + std::string("offload_optimizer.super_offload has no effect here: ") + why;
  }
  return out;
}

nlohmann::json overlap_json(const zero::CommOverlap& o) {
  const std::optional<double> h = o.hidden();
  return {{"busy_s", o.busy_s}, {"blocked_s", o.blocked_s}, {"hidden", h ? nlohmann::json(*h) : nullptr}};
}

class ZeroTrainer : public Trainer {
 public:
  explicit ZeroTrainer(const TrainerContext& ctx)
      : cfg_(ctx.cfg), group_(ctx.group), bs_(ctx.bs), fault_(ctx.fault), lead_(ctx.group.rank() == 0) {
    const config::Config& cfg = cfg_;
    if (cfg.run.memory_budget_mb > 0) Allocator::global().set_budget(size_t(cfg.run.memory_budget_mb) << 20);
    (void)open_run_device(cfg);             // Note [device cap]
    task_ = load_task_agreed(cfg, group_);  // every rank reads the data
    model_ = model_to_train(cfg, lead_);
    // 16-bit runs: the product path, chosen once by rank 0 (Note [16-bit products]), before the
    // memory plan measures the process.
    const zero::EngineOptions configured = engine_options(cfg, bs_);
    dt_ = configured.dtype;
    if (dt_ != DType::f32) {
      products_ = zero::choose_products(group_, dt_, cfg.run.bf16_products, product_shape(cfg, *model_, bs_.micro));
      f32_compute_ = products_->f32_compute(configured.device);
      if (lead_) std::fprintf(stderr, "zerotrain: %s\n", products_->line(dt_, f32_compute_).c_str());
    }
    // Note [peak memory]: the plan before step 1 (with run.memory_budget_mb, the offload that fits).
    const bool evaluates = cfg.run.eval_at_end || cfg.data.eval_every > 0;
    plan_.emplace(plan_before_step1(
        cfg, *model_, bs_,
        {group_.size(), 0, std::string(group_.backend()) == "shm", evaluates ? task_->eval_batch(bs_.micro) : 0,
         group_.local_size(), f32_compute_, comm::stages_through_host(group_, configured.device)}));
    if (lead_)
      for (const std::string& line : plan_->lines) std::fprintf(stderr, "zerotrain: %s\n", line.c_str());
    engine_ = std::make_unique<zero::Engine>(*model_, std::shared_ptr<comm::Group>(&group_, [](comm::Group*) {}),
                                             plan_->options);
    // Note [background save]: committed by a later poll (after each step) or the wait at the end.
    // Every rank saves the same way (each planned with its own data bytes), or the collectives differ.
    save_async_ = group_.all_reduce_scalar(plan_->cfg.checkpoint.async == "true" ? 1.0 : 0.0, "checkpoint.async") ==
                  group_.size();
    const config::CheckpointConfig& ck = cfg.checkpoint;  // Note [checkpoint cadence]
    checkpoints_ = std::make_unique<train::Checkpoints>(
        *engine_, train::CheckpointPlan{ck.dir, ck.every_steps, int(ck.keep_last), save_async_},
        [this](const std::string& path) {
          if (lead_) std::fprintf(stderr, "zerotrain: checkpoint %s\n", path.c_str());
        });
    // Resume: parameters, master, optimizer states and counters from a checkpoint saved at any
    // world size and stage; the data position is the step (same global batch, same seed).
    if (!cfg.run.resume.empty()) {
      const nlohmann::json extra = checkpoints_->resume(cfg.run.resume);
      first_step_ = extra.value("step", int64_t(0));
      skipped_ = extra.value("skipped_steps", int64_t(0));
      const int64_t saved_batch = extra.value("train_batch_size", bs_.train_batch_size);
      ZT_CHECK_AS(ErrorKind::config, saved_batch == bs_.train_batch_size, "[train] ", checkpoints_->resumed_from(),
                  " was saved with train_batch_size ", saved_batch, "; this run has ", bs_.train_batch_size,
                  " (the data position is counted in steps of it)");
    }
  }

  const Task* task() const override { return task_.get(); }
  int64_t train_size() const override { return task_->train_size(); }
  std::string describe() const override { return task_->describe(); }
  int workers() const override { return group_.size(); }
  int worker() const override { return group_.rank(); }
  std::string resumed_from() const override { return checkpoints_->resumed_from(); }
  int64_t first_step() const override { return first_step_; }
  int64_t skipped_before() const override { return skipped_; }

  Device device() const override { return engine_->policy().device; }
  Tensor forward(const std::vector<Tensor>& in) override { return engine_->forward(in); }
  void backward(const Tensor& loss) override { engine_->backward(loss); }
  void begin_step(double lr) override {
    // A background checkpoint whose files are complete is committed before this step's forward, so
    // a crash inside the step does not lose it (Note [background save]).
    checkpoints_->poll();
    engine_->begin_step(lr);
  }
  zero::StepStats step(double lr) override {
    zero::StepStats st;
    try {
      st = engine_->step(lr);
    } catch (const Error& e) {
      // fp16's "loss scale at its minimum" follows the all-ranks overflow vote: every rank raises
      // it at the same step, so it is said once, like any agreed stop.
      if (e.kind() == ErrorKind::data && engine_->policy().loss_scaling) {
        before_stop();
        throw AgreedStop(e.what(), e.kind(), 1);
      }
      throw;
    }
    reduce_overlap_ += st.reduce;
    gather_overlap_ += st.gather;
    gathers_ += st.gathers;
    return st;
  }
  int64_t optimizer_steps() const override { return engine_->optimizer_steps(); }
  std::optional<double> loss_scale() const override {
    if (!engine_->policy().loss_scaling) return std::nullopt;
    return engine_->loss_scale();
  }
  // Every rank takes part (a stage-3 model gathers collectively); dropout is off meanwhile.
  EvalResult evaluate(bool whole) override {
    autograd::NoGradGuard no_grad;
    model_->train(false);
    EvalResult ev = task_->evaluate([&](const std::vector<Tensor>& in) { return engine_->forward(in); }, group_,
                                    task_->eval_batch(bs_.micro), whole);
    model_->train(true);
    return ev;
  }

  void after_step(int64_t steps_done, int64_t total_steps, int64_t skipped) override {
    const int rank = group_.rank();
    const FaultPlan& fault = fault_;
    checkpoints_->after_step(
        steps_done, total_steps,
        {{"train_batch_size", bs_.train_batch_size},
         {"skipped_steps", skipped},
         {"seed", cfg_.seed},
         {"config", cfg_.raw}},
        [&fault, rank, steps_done] { fault.maybe_fire_in_save(rank, steps_done); });  // may run on the writer
  }
  // Before an agreed stop (every rank at the same point): a checkpoint already written in the
  // background is committed, as a foreground save was at its step.
  std::string last_checkpoint() const override { return checkpoints_->last(); }
  void before_stop() override { checkpoints_->before_stop(); }
  void end_of_steps() override { checkpoints_->finish(); }

  nlohmann::json start_fields() override {
    return {{"memory_plan", plan_->record},
            {"products", products_record(products_, dt_, f32_compute_)},
            {"zeropp", engine_->zeropp_summary()}};
  }
  std::vector<std::string> start_lines(int64_t total_steps, const std::string& threads) override {
    std::vector<std::string> lines;
    const std::string zeropp = engine_->zeropp_summary();
    if (!zeropp.empty()) lines.push_back("zerotrain: ZeRO++: " + zeropp);
    const int world = group_.size();
    lines.push_back(detail::concat(
        "zerotrain: ", engine_->num_params(), " parameters (", engine_->padded_params(), " padded), stage ",
        cfg_.zero.stage, ", ", world, world == 1 ? " rank" : " ranks", ", batch ", bs_.train_batch_size, " = ",
        bs_.micro, " micro x ", bs_.accumulation, " accumulation x ", world, ", ", total_steps, " steps",
        cfg_.checkpoint.every_steps <= 0
            ? std::string()
            : ", checkpoints every " + std::to_string(cfg_.checkpoint.every_steps) +
                  (save_async_
                       ? " in the background (a " + format_bytes(size_t(plan_->peak.checkpoint_snapshot)) + " snapshot)"
                       : " in the foreground")));
    const Device dev = engine_->policy().device;
    std::string on_device;
    if (!dev.is_cpu())
      on_device =
          "; " +
          std::string(engine_->policy().optimizer_medium() != zero::Medium::compute ? "parameters, gradients"
                                                                                       : "model states, parameters") +
          " and activations on " + dev.str() + (dev.type == DeviceType::cuda ? "" : " (the simulated GPU)") +
          (comm::stages_through_host(group_, dev) ? ", collectives staged through the host" : "");
    std::string attention;  // which kernels its attention runs (cuDNN's, or the own ones and why)
    if (const ModelKind& kind = model_kind(cfg_); kind.attention) {
      const AttentionHeads h = kind.attention(cfg_);
      attention = "; attention: " + ops::attention_path(dev, dt_, h.n_head, h.n_kv_head, h.head_size, h.key_mask);
    }
    lines.push_back("zerotrain: rank 0: " + threads + "; " + processor_note() + "; comm backend " + group_.backend() +
                    on_device + attention);
    // Note [gradient blocks]: a bucket far below a parameter's size makes its gradient many collectives.
    int64_t rounds = 0, elems = 0;
    for (const zero::BufferPlan& b : engine_->plan().buffers)
      if (zero::block_rounds(b, world) > rounds) {
        rounds = zero::block_rounds(b, world);
        elems = b.block_elems;
      }
    if (rounds > 64)
      lines.push_back(detail::concat("zerotrain: reduce_bucket_size ", plan_->options.zero.reduce_bucket_size,
                                     " sends the largest gradient in ", rounds, " rounds a step of ", elems,
                                     " elements per rank, each a collective: raise it for speed"));
    const std::string offload = offload_note(cfg_, *engine_);
    if (!offload.empty()) lines.push_back("zerotrain: " + offload);
    return lines;
  }
  std::string memory_line() const override { return mem_summary(engine_->policy().device); }

  nlohmann::json step_fields() override {
    const zero::Policy& pol = engine_->policy();
    nlohmann::json rec = {{"comm_bytes", engine_->comm_bytes()},
                          {"cross_node_bytes", engine_->cross_node_bytes()},
                          {"loss_scale", engine_->loss_scale()}};
    add_memory_fields(rec, pol.device);
    // Note [overlap]: how much of the communication ran behind computation since the last record.
    zero::CommOverlap all = reduce_overlap_;
    all += gather_overlap_;
    rec["comm_overlap"] = {{"reduce", overlap_json(reduce_overlap_)}, {"gather", overlap_json(gather_overlap_)}};
    rec["comm_hidden_fraction"] = all.hidden() ? nlohmann::json(*all.hidden()) : nullptr;
    reduce_overlap_ = gather_overlap_ = {};
    if (pol.shard_parameters()) rec["gathers"] = std::exchange(gathers_, 0);
    if (pol.swaps()) {  // rank 0's swap I/O, cumulative
      const zero::SwapStats sw = engine_->swap_stats();
      rec["swap"] = {{"bytes_read", sw.bytes_read},   {"bytes_written", sw.bytes_written}, {"io_wait_s", sw.io_wait_s},
                     {"read_wait_s", sw.read_wait_s}, {"write_wait_s", sw.write_wait_s},   {"update_s", sw.compute_s}};
    }
    if (!pol.device.is_cpu() && pol.optimizer_medium() != zero::Medium::compute) {
      const zero::SwapStats sw = engine_->swap_stats();  // rank 0's host updates and their copies, cumulative
      rec["offload"] = {
          {"update_s", sw.compute_s},        {"down_s", sw.down_s},          {"up_s", sw.up_s},
          {"bytes_down", sw.bytes_down},     {"bytes_up", sw.bytes_up},      {"early_updates", sw.early_updates},
          {"early_redone", sw.early_redone}, {"early_update_s", sw.early_s}, {"early_wait_s", sw.early_wait_s}};
    }
    if (engine_->options().sparse_gradients) {  // rank 0's sparse exchanges and their dense cost, cumulative
      rec["sparse_comm_bytes"] = engine_->sparse_comm_bytes().moved;
      rec["sparse_dense_equivalent_bytes"] = engine_->sparse_comm_bytes().dense_equivalent;
    }
    return rec;
  }
  nlohmann::json summary_fields() override {
    nlohmann::json s = {{"stage", cfg_.zero.stage},
                        {"parameters", engine_->num_params()},
                        {"dtype", dtype_name(engine_->policy().param_dtype)},
                        {"comm_bytes_rank0", engine_->comm_bytes()}};
    if (cfg_.checkpoint.every_steps > 0) {
      s["checkpoint_async"] = save_async_;
      s["checkpoint_blocked_s"] = checkpoints_->blocked_s();
    }
    return s;
  }

  std::vector<std::pair<std::string, Shape>> full_param_shapes() const override { return engine_->full_param_shapes(); }
  void for_each_full_param(const std::function<void(const std::string&, const Tensor&)>& fn) override {
    engine_->for_each_full_param(fn);
  }

 private:
  // Time the steps waited for checkpoints (snapshots, or whole saves).

  const config::Config& cfg_;
  comm::Group& group_;
  config::BatchSizes bs_;
  const FaultPlan& fault_;
  bool lead_;
  std::unique_ptr<Task> task_;
  std::shared_ptr<nn::Module> model_;
  DType dt_ = DType::f32;
  std::optional<zero::ProductsChoice> products_;
  bool f32_compute_ = false;  // Note [f32 compute]
  std::optional<MemoryPlan> plan_;
  std::unique_ptr<zero::Engine> engine_;
  int64_t first_step_ = 0, skipped_ = 0;
  bool save_async_ = false;
  std::unique_ptr<train::Checkpoints> checkpoints_;    // Note [checkpoint cadence]
  zero::CommOverlap reduce_overlap_, gather_overlap_;  // since the last printed step
  int64_t gathers_ = 0;                                // stage 3: unit all-gathers since the last record
};

}  // namespace

std::unique_ptr<Trainer> make_zero_trainer(const TrainerContext& ctx) { return std::make_unique<ZeroTrainer>(ctx); }

}  // namespace zt::apps
