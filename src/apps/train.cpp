// `zerotrain train`: data-parallel training, one loop over a strategy's Trainer (Note [one
// training loop]): progress on stderr (rank 0), metrics as JSON lines in the run directory, final
// weights as safetensors. Every reason to stop early (a signal, a non-finite loss, rank 0's failed
// write) is agreed by all ranks (Note [agreed stops]); outputs are committed together (Note [run
// directory]).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "commands.h"
#include "fault.h"
#include "monitors.h"
#include "profilers.h"
#include "run_dir.h"
#include "session.h"
#include "step_cost.h"
#include "trainer.h"
#include "zt/optim/schedule.h"
#include "zt/train/progress.h"

namespace zt::apps {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

int run_train(const config::Config& cfg, comm::Group& group) {
  const int rank = group.rank(), world = group.size();
  const bool lead = rank == 0;
  group.set_timeout(cfg.run.comm_timeout_s);
  group.set_check_collectives(cfg.run.check_collectives);
  install_stop_signals();
  const std::string threads = pick_threads(cfg);
  const config::BatchSizes bs = check_run_settings(cfg, world);  // before anything runs, as estimate does
  if (lead) print_config_notes(cfg, bs, config::data_parallel_ranks(cfg, world));
  const FaultPlan fault = FaultPlan::from_env();
  // Rank 0 alone writes the run directory; it locks it first, before anything slow.
  // So is checkpoint.dir when the run saves (it is created, so an unusable one fails here, not at the first save).
  std::unique_ptr<RunDir> run_dir;
  std::unique_ptr<DirLock> ckpt_lock;
  std::unique_ptr<Monitors> monitors;  // rank 0's tensorboard and csv_monitor writers
  LeadWork on_lead(lead);
  on_lead([&] {
    run_dir = std::make_unique<RunDir>(cfg.run.dir);
    monitors = std::make_unique<Monitors>(cfg);
    std::error_code ec;
    if (cfg.checkpoint.every_steps > 0 && !std::filesystem::equivalent(cfg.checkpoint.dir, cfg.run.dir, ec))
      ckpt_lock = std::make_unique<DirLock>(cfg.checkpoint.dir, "checkpoint.dir", ErrorKind::checkpoint, "[ckpt]");
  });
  stop_if_voted(agree(group, {stop_signal(), -1, on_lead.failed()}, "run directory"), on_lead, "before step 1",
                cfg.run.dir, false);

  // Note [step cost]: this rank's product rate, measured before the model takes any memory.
  const double rate = measure_rate(cfg);
  const std::unique_ptr<Trainer> trainer = make_trainer({cfg, group, bs, fault});
  const auto [steps_per_epoch, total_steps] = run_length(cfg, bs, trainer->train_size());
  auto schedule = optim::make_schedule(cfg.scheduler.type, cfg.scheduler.params, cfg.optimizer.lr, total_steps);
  const int64_t first_step = trainer->first_step();
  int64_t skipped = trainer->skipped_before(), skipped_in_a_row = 0;
  if (!trainer->resumed_from().empty()) {
    ZT_CHECK_AS(ErrorKind::config, first_step < total_steps, "[train] ", trainer->resumed_from(), " is at step ",
                first_step, "; this run has ", total_steps, " steps in all (raise run.max_steps or run.epochs)");
    if (lead)
      std::fprintf(stderr, "zerotrain: resumed from %s at step %lld\n", trainer->resumed_from().c_str(),
                   (long long)first_step);
  }
  fault.check_reachable(world, total_steps, cfg.checkpoint.every_steps, first_step);
  fault.install_delays(rank);

  // A warm-up the run never finishes is almost always a forgotten key (DeepSpeed's own default is 1,000 steps).
  const nlohmann::json& sp = cfg.scheduler.params;
  if (lead && sp.contains("warmup_num_steps") && sp["warmup_num_steps"].is_number() &&
      sp["warmup_num_steps"].get<double>() > double(total_steps))
    std::fprintf(stderr,
                 "zerotrain: warning: scheduler.params.warmup_num_steps (%g) is longer than this run's %lld steps: the "
                 "learning rate never reaches optimizer.params.lr\n",
                 sp["warmup_num_steps"].get<double>(), (long long)total_steps);
  const nlohmann::json start_fields = trainer->start_fields();
  const std::vector<std::string> start_lines = trainer->start_lines(total_steps, threads);
  if (lead) {
    // Appended, never truncated: an earlier run's log in the same folder is kept.
    on_lead([&] {
      nlohmann::json rec = {{"event", "start"},
                            {"world_size", world},
                            {"total_steps", total_steps},
                            {"threads", threads},
                            {"processor", processor_record()},
                            {"comm_backend", group.backend()},
                            {"config", cfg.raw}};
      rec.update(start_fields);
      run_dir->append_metrics(rec);
    });
    for (const std::string& line : start_lines) std::fprintf(stderr, "%s\n", line.c_str());
    const std::string about = trainer->describe();
    if (!about.empty()) std::fprintf(stderr, "%s\n", about.c_str());
  }

  const StepCost cost = step_cost(cfg, *trainer, bs, group, rate);
  WallClock clock;                // wall_clock_breakdown
  comm::CommStats comms_printed;  // comms_logger: the collectives counted at the last print
  const comm::CommStats comms_at_start = group.stats();
  comms_printed = comms_at_start;
  const double startup_s = seconds_since_process_start();
  const auto t0 = Clock::now();
  train::Pace pace(first_step, total_steps, bs.train_batch_size);  // Note [progress line]
  double loss_sum = 0;
  int64_t loss_count = 0;
  const int workers = trainer->workers(), worker = trainer->worker();
  std::optional<StepBatches> batches;  // Note [batch prefetch]
  if (worker >= 0)
    batches.emplace(*trainer->task(), bs,
                    StepBatches::Run{steps_per_epoch, total_steps, cfg.seed, cfg.data.shuffle, workers, worker},
                    trainer->device());
  // The progress line and its record, every steps_per_print steps (every rank: the loss is reduced).
  auto report = [&](int64_t step, double lr, const zero::StepStats& st) {
    // The computing ranks' mean (a server adds 0).
    const double loss_avg =
        group.all_reduce_scalar(loss_sum / double(loss_count), "step " + std::to_string(step + 1) + ", loss report") /
        workers;
    nlohmann::json fields = trainer->step_fields();  // every rank: it may gather
    loss_sum = 0;
    loss_count = 0;
    const train::Pace::Report r = pace.report(step + 1);
    const double sps = r.samples_per_s, step_ms = r.step_ms, elapsed = r.elapsed_s;
    const int64_t printed_from = r.from_step;
    const WallClock times = clock;
    clock.reset();
    if (!lead) return;
    const double epoch = double(step + 1) / double(steps_per_epoch);
    std::fprintf(stderr, "%s\n",
                 train::format({step + 1, total_steps, epoch, loss_avg, lr, st.grad_norm, trainer->loss_scale(),
                                cost.line(sps, step_ms), r.eta_s, trainer->memory_line()})
                     .c_str());
    nlohmann::json rec = {{"step", step + 1},          {"epoch", double(step + 1) / double(steps_per_epoch)},
                          {"loss", loss_avg},          {"lr", lr},
                          {"grad_norm", st.grad_norm}, {"samples_per_s", sps},
                          {"elapsed_s", elapsed},      {"skipped_steps", skipped}};
    rec.update(cost.fields(sps, step_ms));
    if (cfg.wall_clock_breakdown) {
      std::fprintf(stderr, "step %lld: wall_clock_breakdown: %s\n", (long long)(step + 1), times.line().c_str());
      rec.update(times.fields());
    }
    if (cfg.monitor.comms_logger) rec["comms"] = comm_counts(group.stats(), comms_printed);
    // flops_profiler: the print whose steps hold profile_step.
    if (cfg.monitor.flops_profiler && printed_from < cfg.monitor.flops_profile_step &&
        cfg.monitor.flops_profile_step <= step + 1)
      std::fprintf(stderr, "step %lld: flops_profiler: %s\n", (long long)(step + 1), cost.profile(step_ms).c_str());
    rec.update(fields);
    on_lead([&] {
      run_dir->append_metrics(rec);
      monitors->write("Train/Samples", rec, (step + 1) * bs.train_batch_size);
    });
  };
  for (int64_t step = first_step; step < total_steps; ++step) {
    fault.maybe_fire(rank, step + 1);
    if (fault.diverges_at("skip", rank, step + 1)) continue;
    if (fault.diverges_at("eval", rank, step + 1)) trainer->evaluate(/*whole=*/false);
    // The schedule follows applied updates: an fp16 step skipped on overflow does not advance it (as DeepSpeed).
    const double lr = schedule->lr(trainer->optimizer_steps());
    trainer->begin_step(lr);
    double step_loss = 0;
    if (batches) {  // a rank that computes a share of the batch
      const StepPlace at = batches->place(step);
      step_loss = train_micro_batches(
          *trainer->task(), batches->order(at.epoch), bs, cfg.seed, at, workers, worker,
          [&](int64_t m) { return batches->take(at, m); },
          [&](const std::vector<Tensor>& in) {
            const auto f0 = Clock::now();
            Tensor out = trainer->forward(in);
            fault.maybe_delay(rank, FaultPlan::forward);
            clock.forward_s += std::chrono::duration<double>(Clock::now() - f0).count();
            return out;
          },
          [&](const Tensor& l) {
            const auto b0 = Clock::now();
            trainer->backward(l);
            clock.backward_s += std::chrono::duration<double>(Clock::now() - b0).count();
          });
    }
    fault.maybe_delay(rank, FaultPlan::optimizer_step);
    const auto s0 = Clock::now();
    const zero::StepStats st = trainer->step(lr);
    clock.step_s += std::chrono::duration<double>(Clock::now() - s0).count();
    ++clock.steps;
    // A non-finite loss stops the run, except where fp16 loss scaling skipped the step for it.
    const bool bad_loss = !std::isfinite(step_loss) && !st.skipped;
    const Vote vote = agree(group, {stop_signal(), bad_loss ? rank : -1, on_lead.failed()},
                            "step " + std::to_string(step + 1) + ", stop vote");
    if (vote.signal || vote.bad_loss_rank >= 0 || vote.lead_failed) trainer->before_stop();
    stop_if_voted(vote, on_lead, "at step " + std::to_string(step + 1) + " of " + std::to_string(total_steps),
                  cfg.run.dir, true, trainer->last_checkpoint());
    loss_sum += step_loss;
    ++loss_count;
    skipped_in_a_row = st.skipped ? skipped_in_a_row + 1 : 0;
    if (st.skipped) {
      ++skipped;
      if (lead)
        std::fprintf(stderr, "step %lld: fp16 gradient overflow, step skipped on every rank (loss scale %g -> %g)\n",
                     (long long)(step + 1), st.loss_scale, trainer->loss_scale().value_or(1));
    }
    // Every rank skipped the same steps (the overflow vote), so every rank stops here together.
    const int64_t max_skips = cfg.run.max_consecutive_skipped_steps;
    if (max_skips > 0 && skipped_in_a_row >= max_skips) {
      trainer->before_stop();
      throw AgreedStop(
          detail::concat("[train] ", skipped_in_a_row,
                         " optimizer steps in a row were skipped for fp16 "
                         "gradient overflow (steps ",
                         step + 2 - skipped_in_a_row, " to ", step + 1, ", loss scale ",
                         trainer->loss_scale().value_or(1), "): the model is not training; ", overflow_advice(cfg.fp16),
                         " (run.max_consecutive_skipped_steps sets this limit); nothing from this run was saved as "
                         "trained"),
          ErrorKind::config, 1);
    }
    trainer->after_step(step + 1, total_steps, skipped);
    const bool print = (step + 1) % std::max<int64_t>(1, cfg.steps_per_print) == 0 || step + 1 == total_steps;
    if (print) report(step, lr, st);
    // After the step's own progress line: its validation.
    const int64_t eval_every = cfg.data.eval_every;
    if (eval_every > 0 && (step + 1) % eval_every == 0 && step + 1 != total_steps) {
      EvalResult ev = trainer->evaluate(/*whole=*/false);
      if (lead) std::fprintf(stderr, "step %lld: %s\n", (long long)(step + 1), ev.line.c_str());
      ev.metrics["step"] = step + 1;
      on_lead([&] {
        run_dir->append_metrics(ev.metrics);
        monitors->write("Eval/Samples", ev.metrics, (step + 1) * bs.train_batch_size);
      });
    }
  }
  trainer->end_of_steps();  // the run's last checkpoint is committed before the run ends
  const double train_s = std::chrono::duration<double>(Clock::now() - t0).count();
  // A run none of whose steps updated the model (fp16 overflow at every one, fewer than the limit
  // above) has nothing to save as trained; every rank skipped alike, so every rank stops here.
  if (total_steps > first_step && skipped_in_a_row == total_steps - first_step)
    throw AgreedStop(detail::concat("[train] all ", skipped_in_a_row, " optimizer steps of this run were skipped for ",
                                    "fp16 gradient overflow (loss scale ", trainer->loss_scale().value_or(1),
                                    "): the model did not train; ", overflow_advice(cfg.fp16),
                                    "; nothing from this run was saved as trained"),
                     ErrorKind::config, 1);

  const auto eval_t0 = Clock::now();
  std::optional<EvalResult> final_eval = eval_at_end(
      cfg, [&](bool whole) { return trainer->evaluate(whole); }, on_lead, run_dir, total_steps);
  const double eval_s = std::chrono::duration<double>(Clock::now() - eval_t0).count();
  on_lead([&] {
    if (final_eval) monitors->write("Eval/Samples", final_eval->metrics, total_steps * bs.train_batch_size);
    monitors->flush();
  });
  nlohmann::json summary = {{"steps", total_steps},
                            {"train_seconds", train_s},
                            {"world_size", world},
                            {"skipped_steps", skipped},
                            {"weights_saved", cfg.run.save_weights},
                            {"samples_per_s", double((total_steps - first_step) * bs.train_batch_size) / train_s},
                            {"startup_seconds", startup_s},
                            {"final_eval_seconds", eval_s}};
  summary.update(cost.summary(double((total_steps - first_step) * bs.train_batch_size) / train_s,
                              1000 * train_s / double(std::max<int64_t>(1, total_steps - first_step))));
  summary.update(trainer->summary_fields());
  if (lead && cfg.monitor.comms_logger) {
    const comm::CommStats& all = group.stats();
    comm::CommStats run = all;  // this run's, from step 1 on
    for (size_t k = 0; k < comm::kNumColl; ++k) {
      run.calls[k] -= comms_at_start.calls[k];
      run.bytes[k] -= comms_at_start.bytes[k];
    }
    std::fprintf(stderr, "zerotrain: comms_logger: rank 0's collectives of the run: %s\n", comm_summary(run).c_str());
  }
  // Consolidated weights in fp32, streamed: every rank takes part in the gathers (one unit at a
  // time at stage 3); ZT_FAULT step K+1 of a K-step run fires in the final save.
  finish_run(cfg, group, on_lead, run_dir,
             {trainer->full_param_shapes(), [&](const auto& fn) { trainer->for_each_full_param(fn); },
              std::move(summary), std::move(final_eval), total_steps, train_s, startup_s, eval_s,
              [&] { fault.maybe_fire(rank, total_steps + 1); }});
  return 0;
}

}  // namespace zt::apps
