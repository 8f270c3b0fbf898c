// `zerotrain train`: data-parallel training with the ZeRO engine, progress on stderr (rank 0),
// metrics as JSON lines in the run directory, final weights as safetensors. Every reason to stop
// early (a signal, a non-finite loss, rank 0's failed write) is agreed by all ranks
// (Note [agreed stops]); outputs are committed together (Note [run directory]).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>

#include "agree.h"
#include "commands.h"
#include "fault.h"
#include "memory_plan.h"
#include "run_dir.h"
#include "session.h"
#include "tasks.h"
#include "train_common.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/ckpt/checkpoint.h"
#include "zt/comm/group.h"
#include "zt/nn/transformer.h"
#include "zt/ops/ops.h"
#include "zt/optim/schedule.h"
#include "zt/zero/products.h"

namespace zt::apps {

namespace {
using Clock = std::chrono::steady_clock;

// What the offload sections mean for this run, for the start line ("" when nothing is offloaded).
std::string offload_note(const config::Config& c, const zero::Engine& e) {
  std::string out;
  if (c.zero.offload_optimizer.device == "cpu" && e.policy().device.is_cpu())
    out = "offload_optimizer: cpu, where a CPU run's fp32 master and optimizer states already are (host memory)";
  if (e.policy().optimizer_residence == zero::Residence::host) {
    const zero::Plan& p = e.plan();
    const zero::MemoryEstimate m = p.memory();
    out = detail::concat("offload_optimizer: cpu (ZeRO-Offload), ", p.policy.fp32_master ? "fp32 master and " : "",
                         "optimizer states in pinned host memory (", format_bytes(size_t(m.master + m.optim)),
                         " per rank), updated by the host in ", p.swap_tile_elems(), "-element tiles; ",
                         format_bytes(size_t(m.on_device())), " of model states per rank on ", p.policy.device);
  }
  if (e.policy().optimizer_residence == zero::Residence::file) {
    const zero::Plan& p = e.plan();
    out = detail::concat("offload_optimizer: nvme, fp32 master and optimizer states in swap files under ",
                         p.policy.swap.dir, "/rank*/ (", e.swap_stats().direct ? "O_DIRECT" : "page cache", "), ",
                         p.swap_tile_elems(), "-element tiles through ", p.policy.swap.buffers, " buffers (",
                         format_bytes(size_t(p.memory().optim)), " in memory)");
  }
  std::string par;
  if (c.zero.offload_param.device == "cpu" && e.policy().device.is_cpu())
    par = "offload_param: cpu, where a CPU run's parameters already are";
  if (e.policy().param_residence != zero::Residence::memory) {  // in swap files, or pinned beside a device
    const zero::Plan& p = e.plan();
    const bool file = p.policy.param_residence == zero::Residence::file;
    int64_t bytes = 0, units = 0;
    for (size_t b = 0; b < p.buffers.size(); ++b)
      if (file ? p.param_swapped(b) : p.param_on_host(b)) {
        ++units;
        bytes += p.buffers[b].padded / p.world * int64_t(dtype_size(p.policy.param_dtype));
      }
    const std::string shards = detail::concat("the parameter shards of ", units, " of ", p.buffers.size(), " units ");
    par = file ? detail::concat("offload_param: nvme, ", shards, "in swap files under ", p.policy.swap.param_dir,
                                "/rank*/ (", format_bytes(size_t(bytes)), " per rank on disk, read ahead of each all-gather)")
               : detail::concat("offload_param: cpu, ", shards, "in pinned host memory (", format_bytes(size_t(bytes)),
                                " per rank, uploaded for each all-gather)");
  }
  if (!par.empty()) out += (out.empty() ? "" : "; ") + par;
  return out;
}

}  // namespace

int run_train(const config::Config& cfg, comm::Group& group) {
  if (cfg.run.strategy == "parameter_server") return run_train_ps(cfg, group);
  const int rank = group.rank(), world = group.size();
  const bool lead = rank == 0;
  group.set_timeout(cfg.run.comm_timeout_s);
  group.set_check_collectives(cfg.run.check_collectives);
  install_stop_signals();
  const std::string threads = pick_threads(cfg);
  if (cfg.run.memory_budget_mb > 0) Allocator::global().set_budget(size_t(cfg.run.memory_budget_mb) << 20);
  // run.device_memory_mb caps the device's allocator, as PyTorch's per-process memory fraction.
  if (cfg.run.device_memory_mb > 0 && cfg.run.device != "cpu")
    allocator_for(run_device(cfg.run.device)).set_budget(size_t(cfg.run.device_memory_mb) << 20);
  const config::BatchSizes bs = check_run_settings(cfg, world);  // before anything runs, as estimate does
  const FaultPlan fault = FaultPlan::from_env();
  // Rank 0 alone writes the run directory; it locks it first, before anything slow.
  // So is checkpoint.dir when the run saves (it is created, so an unusable one fails here, not at the first save).
  std::unique_ptr<RunDir> run_dir;
  std::unique_ptr<DirLock> ckpt_lock;
  LeadWork on_lead(lead);
  on_lead([&] {
    run_dir = std::make_unique<RunDir>(cfg.run.dir);
    std::error_code ec;
    if (cfg.checkpoint.every_steps > 0 && !std::filesystem::equivalent(cfg.checkpoint.dir, cfg.run.dir, ec))
      ckpt_lock = std::make_unique<DirLock>(cfg.checkpoint.dir, "checkpoint.dir", ErrorKind::checkpoint, "[ckpt]");
  });
  stop_if_voted(agree(group, {stop_signal(), -1, on_lead.failed()}, "run directory"), on_lead, "before step 1",
                cfg.run.dir, false);

  const std::unique_ptr<Task> task = load_task_agreed(cfg, group);  // every rank reads the data
  const auto [steps_per_epoch, total_steps] = run_length(cfg, bs, task->train_size());
  auto model = model_to_train(cfg, lead);
  // 16-bit runs: the product path, chosen once by rank 0 (Note [16-bit products]), before the
  // memory plan measures the process.
  std::optional<zero::ProductsChoice> products;
  const zero::EngineOptions configured = engine_options(cfg, bs);
  const DType dt = configured.dtype;
  bool f32_compute = false;  // Note [f32 compute]
  if (dt != DType::f32) {
    products = zero::choose_products(group, dt, cfg.run.bf16_products, product_shape(cfg, *model, bs.micro));
    f32_compute = products->f32_compute(configured.device);
    if (lead) std::fprintf(stderr, "zerotrain: %s\n", products->line(dt, f32_compute).c_str());
  }
  // Note [peak memory]: the plan before step 1 (with run.memory_budget_mb, the offload that fits).
  const MemoryPlan mem_plan =
      plan_before_step1(cfg, *model, bs,
                        {world, 0, std::string(group.backend()) == "shm",
                         cfg.run.eval_at_end || cfg.data.eval_every > 0 ? task->eval_batch(bs.micro) : 0,
                         group.local_size(), f32_compute});
  if (lead)
    for (const std::string& line : mem_plan.lines) std::fprintf(stderr, "zerotrain: %s\n", line.c_str());
  zero::Engine engine(*model, std::shared_ptr<comm::Group>(&group, [](comm::Group*) {}), mem_plan.options);
  auto schedule = optim::make_schedule(cfg.scheduler.type, cfg.scheduler.params, cfg.optimizer.lr, total_steps);
  // Resume: parameters, master, optimizer states and counters from a checkpoint saved at any
  // world size and stage; the data position is the step (same global batch, same seed).
  int64_t first_step = 0, skipped = 0, skipped_in_a_row = 0;
  zero::CommOverlap reduce_overlap, gather_overlap;  // rank 0's, since the last printed step
  int64_t gathers = 0;                               // stage 3: unit all-gathers since the last metrics line
  if (!cfg.run.resume.empty()) {
    std::string path;
    const nlohmann::json extra = ckpt::load_checkpoint(engine, cfg.checkpoint.dir, cfg.run.resume, &path);
    first_step = extra.value("step", int64_t(0));
    skipped = extra.value("skipped_steps", int64_t(0));
    const int64_t saved_batch = extra.value("train_batch_size", bs.train_batch_size);
    ZT_CHECK_AS(ErrorKind::config, saved_batch == bs.train_batch_size, "[train] ", path,
                " was saved with train_batch_size ", saved_batch, "; this run has ", bs.train_batch_size,
                " (the data position is counted in steps of it)");
    ZT_CHECK_AS(ErrorKind::config, first_step < total_steps, "[train] ", path, " is at step ", first_step,
                "; this run has ", total_steps, " steps in all (raise run.max_steps or run.epochs)");
    if (lead) std::fprintf(stderr, "zerotrain: resumed from %s at step %lld\n", path.c_str(), (long long)first_step);
  }
  fault.check_reachable(world, total_steps, cfg.checkpoint.every_steps, first_step);
  fault.install_delays(rank);
  const std::string zeropp = engine.zeropp_summary();
  if (lead && !zeropp.empty()) std::fprintf(stderr, "zerotrain: ZeRO++: %s\n", zeropp.c_str());
  // Note [background save]: committed by a later poll (after each step) or the wait at the end.
  // Every rank saves the same way (each planned with its own data bytes), or the collectives differ.
  const bool save_async =
      group.all_reduce_scalar(mem_plan.cfg.checkpoint.async == "true" ? 1.0 : 0.0, "checkpoint.async") == world;
  double save_blocked_s = 0;  // time the steps waited for checkpoints (snapshots, or whole saves)
  auto blocking = [&](const std::function<void()>& fn) {
    const auto t = Clock::now();
    fn();
    save_blocked_s += std::chrono::duration<double>(Clock::now() - t).count();
  };
  ckpt::Saver saver(engine, [&](const std::string& path) {
    if (lead) std::fprintf(stderr, "zerotrain: checkpoint %s\n", path.c_str());
  });
  // Before an agreed stop (every rank at the same point): a checkpoint already written in the
  // background is committed, as a foreground save was at its step.
  auto commit_before_stop = [&] {
    try {
      saver.wait();
    } catch (const Error&) {  // every rank failed it alike; the stop's own line is the one to say
    }
  };
  auto save = [&](int64_t steps_done) {
    char tag[32];
    std::snprintf(tag, sizeof tag, "step_%08lld", (long long)steps_done);
    ckpt::SaveOptions o{cfg.checkpoint.dir,
                        tag,
                        cfg.checkpoint.keep_last,
                        {{"step", steps_done},
                         {"train_batch_size", bs.train_batch_size},
                         {"skipped_steps", skipped},
                         {"seed", cfg.seed},
                         {"config", cfg.raw}},
                        [&fault, rank, steps_done] { fault.maybe_fire_in_save(rank, steps_done); }};  // may run on the writer
    blocking([&] { saver.save(o, save_async); });
  };

  if (lead) {
    // Appended, never truncated: an earlier run's log in the same folder is kept.
    on_lead([&] {
      run_dir->append_metrics({{"event", "start"},
                               {"world_size", world},
                               {"total_steps", total_steps},
                               {"threads", threads},
                               {"processor", processor_record()},
                               {"comm_backend", group.backend()},
                               {"memory_plan", mem_plan.record},
                               {"products", products_record(products, dt, f32_compute)},
                               {"zeropp", zeropp},
                               {"config", cfg.raw}});
    });
    std::fprintf(stderr,
                 "zerotrain: %lld parameters (%lld padded), stage %d, %d rank%s, batch %lld = %lld micro x %lld "
                 "accumulation x %d, %lld steps%s\n",
                 (long long)engine.num_params(), (long long)engine.padded_params(), cfg.zero.stage, world,
                 world == 1 ? "" : "s", (long long)bs.train_batch_size, (long long)bs.micro, (long long)bs.accumulation,
                 world, (long long)total_steps,
                 cfg.checkpoint.every_steps <= 0
                     ? ""
                     : (", checkpoints every " + std::to_string(cfg.checkpoint.every_steps) +
                        (save_async ? " in the background (a " +
                                          format_bytes(size_t(mem_plan.peak.checkpoint_snapshot)) + " snapshot)"
                                    : " in the foreground"))
                           .c_str());
    const Device dev = engine.policy().device;
    std::fprintf(stderr, "zerotrain: rank 0: %s; %s; comm backend %s%s\n", threads.c_str(), processor_note().c_str(),
                 group.backend(),
                 dev.is_cpu() ? ""
                              : ("; " +
                                 std::string(engine.policy().optimizer_residence != zero::Residence::memory
                                                 ? "parameters, gradients"
                                                 : "model states, parameters") +
                                 " and activations on " + dev.str() +
                                 (dev.type == DeviceType::cuda ? "" : " (the simulated GPU)") +
                                 (group.device() == dev ? "" : ", collectives staged through the host"))
                                    .c_str());
    const std::string offload = offload_note(cfg, engine);
    if (!offload.empty()) std::fprintf(stderr, "zerotrain: %s\n", offload.c_str());
  }

  // Every rank takes part (a stage-3 model gathers collectively); dropout is off meanwhile.
  auto run_eval_pass = [&](bool whole) {
    autograd::NoGradGuard no_grad;
    model->train(false);
    EvalResult ev = task->evaluate([&](const std::vector<Tensor>& in) { return engine.forward(in); }, group,
                                   task->eval_batch(bs.micro), whole);
    model->train(true);
    return ev;
  };
  if (lead) {
    const std::string about = task->describe();
    if (!about.empty()) std::fprintf(stderr, "%s\n", about.c_str());
  }

  const auto t0 = Clock::now();
  auto last = t0;
  int64_t last_step = 0;
  std::vector<int64_t> order;
  int64_t order_epoch = -1;
  double loss_sum = 0;
  int64_t loss_count = 0;
  last_step = first_step;
  for (int64_t step = first_step; step < total_steps; ++step) {
    fault.maybe_fire(rank, step + 1);
    if (fault.diverges_at("skip", rank, step + 1)) continue;
    if (fault.diverges_at("eval", rank, step + 1)) run_eval_pass(/*whole=*/false);
    const int64_t epoch = step / steps_per_epoch, in_epoch = step % steps_per_epoch;
    if (epoch != order_epoch) {
      order = data::epoch_order(task->train_size(), cfg.seed, epoch, cfg.data.shuffle);
      order_epoch = epoch;
    }
    const double step_loss = train_micro_batches(
        *task, order, bs, cfg.seed, {step, epoch, in_epoch}, world, rank,
        [&](const std::vector<Tensor>& in) {
          Tensor out = engine.forward(in);
          fault.maybe_delay(rank, FaultPlan::forward);
          return out;
        },
        [&](const Tensor& l) { engine.backward(l); });
    // The schedule follows applied updates: an fp16 step skipped on overflow does not advance it (as DeepSpeed).
    const double lr = schedule->lr(engine.optimizer_steps());
    zero::StepStats st;
    fault.maybe_delay(rank, FaultPlan::optimizer_step);
    try {
      st = engine.step(lr);
    } catch (const Error& e) {
      // fp16's "loss scale at its minimum" follows the all-ranks overflow vote: every rank raises
      // it at the same step, so it is said once, like any agreed stop.
      if (e.kind() == ErrorKind::data && engine.policy().loss_scaling) {
        commit_before_stop();
        throw AgreedStop(e.what(), e.kind(), 1);
      }
      throw;
    }
    reduce_overlap += st.reduce;
    gather_overlap += st.gather;
    gathers += st.gathers;
    // A non-finite loss stops the run, except where fp16 loss scaling skipped the step for it.
    const bool bad_loss = !std::isfinite(step_loss) && !st.skipped;
    const Vote vote = agree(group, {stop_signal(), bad_loss ? rank : -1, on_lead.failed()},
                            "step " + std::to_string(step + 1) + ", stop vote");
    if (vote.signal || vote.bad_loss_rank >= 0 || vote.lead_failed) commit_before_stop();
    stop_if_voted(vote, on_lead, "at step " + std::to_string(step + 1) + " of " + std::to_string(total_steps),
                  cfg.run.dir);
    loss_sum += step_loss;
    ++loss_count;
    skipped_in_a_row = st.skipped ? skipped_in_a_row + 1 : 0;
    if (st.skipped) {
      ++skipped;
      if (lead)
        std::fprintf(stderr, "step %lld: fp16 gradient overflow, step skipped on every rank (loss scale %g -> %g)\n",
                     (long long)(step + 1), st.loss_scale, engine.loss_scale());
    }
    // Every rank skipped the same steps (the overflow vote), so every rank stops here together.
    const int64_t max_skips = cfg.run.max_consecutive_skipped_steps;
    if (max_skips > 0 && skipped_in_a_row >= max_skips) {
      commit_before_stop();
      throw AgreedStop(
          detail::concat("[train] ", skipped_in_a_row,
                         " optimizer steps in a row were skipped for fp16 "
                         "gradient overflow (steps ",
                         step + 2 - skipped_in_a_row, " to ", step + 1, ", loss scale ", engine.loss_scale(),
                         "): the model is not training; ", overflow_advice(cfg.fp16),
                         " (run.max_consecutive_skipped_steps sets this limit); nothing from this run was saved as "
                         "trained"),
          ErrorKind::config, 1);
    }
    const int64_t every = cfg.checkpoint.every_steps;
    blocking([&] { saver.poll(); });
    if (every > 0 && ((step + 1) % every == 0 || step + 1 == total_steps)) save(step + 1);
    const int64_t eval_every = cfg.data.eval_every;
    if (eval_every > 0 && (step + 1) % eval_every == 0 && step + 1 != total_steps) {
      EvalResult ev = run_eval_pass(/*whole=*/false);
      if (lead) std::fprintf(stderr, "step %lld: %s\n", (long long)(step + 1), ev.line.c_str());
      ev.metrics["step"] = step + 1;
      on_lead([&] { run_dir->append_metrics(ev.metrics); });
    }
    const bool print = (step + 1) % std::max<int64_t>(1, cfg.steps_per_print) == 0 || step + 1 == total_steps;
    if (!print) continue;
    const double loss_avg =
        group.all_reduce_scalar(loss_sum / double(loss_count), "step " + std::to_string(step + 1) + ", loss report") /
        world;
    loss_sum = 0;
    loss_count = 0;
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - last).count();
    const double elapsed = std::chrono::duration<double>(now - t0).count();
    const double sps = double((step + 1 - last_step) * bs.train_batch_size) / std::max(dt, 1e-9);
    const double eta = elapsed / double(step + 1 - first_step) * double(total_steps - step - 1);
    last = now;
    last_step = step + 1;
    if (!lead) continue;
    char scale[48] = "";  // %g: a scale past int64 (2^63 and up) must not print as a wrapped integer
    if (engine.policy().loss_scaling) std::snprintf(scale, sizeof scale, " | loss-scale %g", engine.loss_scale());
    char rate[32];  // a billion-parameter step takes minutes: 0.01 samples/s must not print as 0
    std::snprintf(rate, sizeof rate, sps < 10 ? "%.3g" : "%.0f", sps);
    std::fprintf(
        stderr, "step %lld/%lld | epoch %.2f | loss %.4f | lr %.2e | grad-norm %.3f%s | %s samples/s | ETA %s | %s\n",
        (long long)(step + 1), (long long)total_steps, double(step + 1) / double(steps_per_epoch), loss_avg, lr,
        st.grad_norm, scale, rate, fmt_eta(eta).c_str(), mem_summary(engine.policy().device).c_str());
    nlohmann::json rec = {{"step", step + 1},
                          {"epoch", double(step + 1) / double(steps_per_epoch)},
                          {"loss", loss_avg},
                          {"lr", lr},
                          {"grad_norm", st.grad_norm},
                          {"samples_per_s", sps},
                          {"elapsed_s", elapsed},
                          {"comm_bytes", engine.comm_bytes()},
                          {"cross_node_bytes", engine.cross_node_bytes()},
                          {"loss_scale", engine.loss_scale()},
                          {"skipped_steps", skipped}};
    add_memory_fields(rec, engine.policy().device);
    // Note [overlap]: how much of the communication ran behind computation since the last record.
    auto overlap_json = [](const zero::CommOverlap& o) {
      const std::optional<double> h = o.hidden();
      return nlohmann::json{
          {"busy_s", o.busy_s}, {"blocked_s", o.blocked_s}, {"hidden", h ? nlohmann::json(*h) : nullptr}};
    };
    zero::CommOverlap all = reduce_overlap;
    all += gather_overlap;
    rec["comm_overlap"] = {{"reduce", overlap_json(reduce_overlap)}, {"gather", overlap_json(gather_overlap)}};
    rec["comm_hidden_fraction"] = all.hidden() ? nlohmann::json(*all.hidden()) : nullptr;
    reduce_overlap = gather_overlap = {};
    if (engine.policy().shard_parameters()) rec["gathers"] = std::exchange(gathers, 0);
    if (engine.policy().optimizer_residence == zero::Residence::file ||
        engine.policy().param_residence == zero::Residence::file) {  // rank 0's swap I/O, cumulative
      const zero::SwapStats sw = engine.swap_stats();
      rec["swap"] = {{"bytes_read", sw.bytes_read},   {"bytes_written", sw.bytes_written}, {"io_wait_s", sw.io_wait_s},
                     {"read_wait_s", sw.read_wait_s}, {"write_wait_s", sw.write_wait_s},   {"update_s", sw.compute_s}};
    }
    if (!engine.policy().device.is_cpu() && engine.policy().optimizer_residence != zero::Residence::memory) {
      const zero::SwapStats sw = engine.swap_stats();  // rank 0's host updates and their copies, cumulative
      rec["offload"] = {{"update_s", sw.compute_s}, {"down_s", sw.down_s},         {"up_s", sw.up_s},
                        {"bytes_down", sw.bytes_down}, {"bytes_up", sw.bytes_up}};
    }
    if (engine.options().sparse_gradients) {  // rank 0's sparse exchanges and their dense cost, cumulative
      rec["sparse_comm_bytes"] = engine.sparse_comm_bytes().moved;
      rec["sparse_dense_equivalent_bytes"] = engine.sparse_comm_bytes().dense_equivalent;
    }
    on_lead([&] { run_dir->append_metrics(rec); });
  }
  blocking([&] { saver.wait(); });  // the run's last checkpoint is committed before the run ends
  const double train_s = std::chrono::duration<double>(Clock::now() - t0).count();
  // A run none of whose steps updated the model (fp16 overflow at every one, fewer than the limit
  // above) has nothing to save as trained; every rank skipped alike, so every rank stops here.
  if (total_steps > first_step && skipped_in_a_row == total_steps - first_step)
    throw AgreedStop(detail::concat("[train] all ", skipped_in_a_row, " optimizer steps of this run were skipped for ",
                                    "fp16 gradient overflow (loss scale ", engine.loss_scale(), "): the model did not ",
                                    "train; ", overflow_advice(cfg.fp16), "; nothing from this run was saved as trained"),
                     ErrorKind::config, 1);

  std::optional<EvalResult> final_eval = eval_at_end(cfg, run_eval_pass, on_lead, run_dir, total_steps);
  nlohmann::json summary = {{"steps", total_steps},
                            {"train_seconds", train_s},
                            {"world_size", world},
                            {"stage", cfg.zero.stage},
                            {"parameters", engine.num_params()},
                            {"dtype", dtype_name(engine.policy().param_dtype)},
                            {"skipped_steps", skipped},
                            {"weights_saved", cfg.run.save_weights},
                            {"samples_per_s", double((total_steps - first_step) * bs.train_batch_size) / train_s},
                            {"comm_bytes_rank0", engine.comm_bytes()}};
  if (cfg.checkpoint.every_steps > 0) {
    summary["checkpoint_async"] = save_async;
    summary["checkpoint_blocked_s"] = save_blocked_s;
  }
  // Consolidated weights in fp32, streamed: every rank takes part in the gathers (one unit at a
  // time at stage 3); ZT_FAULT step K+1 of a K-step run fires in the final save.
  finish_run(cfg, group, on_lead, run_dir,
             {engine.full_param_shapes(),
              [&](const auto& fn) { engine.for_each_full_param(fn); },
              std::move(summary),
              std::move(final_eval),
              total_steps,
              train_s,
              [&] { fault.maybe_fire(rank, total_steps + 1); }});
  return 0;
}

}  // namespace zt::apps
