// `zerotrain train` with run.strategy = parameter_server (Note [parameter server] in
// zt/zero/param_server.h): ranks 0..S-1 serve, the others compute. The same progress line,
// metrics records, agreed stops and committed outputs as the ZeRO loop (train.cpp), without
// checkpoints (config::parse refuses them). Rank 0, a server, writes the run directory: the
// loss comes to it in the report's all-reduce, evaluations and weights from the first worker,
// and each record lists every rank's memory ("memory_per_rank").
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "commands.h"
#include "memory_plan.h"
#include "run_dir.h"
#include "session.h"
#include "tasks.h"
#include "train_common.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/data/mnist.h"
#include "zt/nn/transformer.h"
#include "zt/ops/ops.h"
#include "zt/optim/schedule.h"
#include "zt/zero/param_server.h"

namespace zt::apps {

namespace {
using Clock = std::chrono::steady_clock;

// Text the first worker has (an evaluation, the data's description) said to every rank, as bytes.
std::string share_text(comm::Group& group, int root, const std::string& mine) {
  TagScope tag(MemTag::comm);
  Tensor len = Tensor::zeros({1}, DType::i64);
  len.data<int64_t>()[0] = int64_t(mine.size());
  group.broadcast(len, root, "text from the first worker, length");
  const int64_t n = len.data<int64_t>()[0];
  Tensor bytes = Tensor::zeros({(n + 3) / 4 + 1}, DType::i32);
  if (group.rank() == root) std::memcpy(bytes.raw_data(), mine.data(), mine.size());
  group.broadcast(bytes, root, "text from the first worker");
  return std::string(static_cast<const char*>(bytes.raw_data()), size_t(n));
}

EvalResult share_eval(comm::Group& group, int root, const EvalResult& mine) {
  const std::string got = share_text(group, root, group.rank() == root ? mine.metrics.dump() + "\n" + mine.line : "");
  const size_t cut = got.find('\n');
  return {nlohmann::json::parse(got.substr(0, cut)), got.substr(cut + 1)};
}

// Every rank's role and memory (its device's allocator with run.device), gathered to every rank
// (Note [parameter-server memory]).
nlohmann::json memory_per_rank(comm::Group& group, bool server, Device device) {
  constexpr int64_t k = 9;
  const MemStats ms = allocator_for(device).stats();
  Tensor mine = Tensor::empty({k}, DType::i64, MemTag::comm),
         all = Tensor::empty({k * group.size()}, DType::i64, MemTag::comm);
  int64_t* m = mine.data<int64_t>();
  const MemTag tags[] = {MemTag::param, MemTag::grad, MemTag::master, MemTag::optim, MemTag::comm, MemTag::activation};
  m[0] = server ? 1 : 0;
  m[1] = int64_t(ms.total_peak);
  m[2] = read_rss().peak;
  for (int i = 0; i < 6; ++i) m[3 + i] = int64_t(ms.peak[size_t(tags[i])]);
  group.all_gather(mine, all, "memory per rank");
  nlohmann::json out = nlohmann::json::array();
  for (int r = 0; r < group.size(); ++r) {
    const int64_t* a = all.data<int64_t>() + r * k;
    nlohmann::json peak;
    for (int i = 0; i < 6; ++i) peak[mem_tag_name(tags[i])] = a[3 + i];
    out.push_back(
        {{"rank", r}, {"role", a[0] ? "server" : "worker"}, {"peak", a[1]}, {"rss_peak", a[2]}, {"memory_peak", peak}});
  }
  return out;
}

nlohmann::json ps_memory_json(const zero::PsMemory& m) {
  return {{"param", m.param}, {"grad", m.grad}, {"master", m.master},
          {"optim", m.optim}, {"comm", m.comm}, {"total", m.total()}};
}
}  // namespace

int run_train_ps(const config::Config& cfg, comm::Group& group) {
  const int rank = group.rank(), world = group.size();
  const bool lead = rank == 0;
  group.set_timeout(cfg.run.comm_timeout_s);
  group.set_check_collectives(cfg.run.check_collectives);
  install_stop_signals();
  const std::string threads = pick_threads(cfg);
  const config::BatchSizes bs = check_run_settings(cfg, world);  // micro x accumulation x workers
  const int servers = cfg.run.parameter_servers, workers = world - servers;
  const bool server = rank < servers;
  std::unique_ptr<RunDir> run_dir;
  LeadWork on_lead(lead);
  on_lead([&] { run_dir = std::make_unique<RunDir>(cfg.run.dir); });
  stop_if_voted(agree(group, {stop_signal(), -1, on_lead.failed()}, "run directory"), on_lead, "before step 1",
                cfg.run.dir, false);
  // The workers read the data; the servers hold none (the epoch's length and the description
  // come from the first worker).
  const std::unique_ptr<Task> task = load_task_agreed(cfg, group, /*read=*/!server);
  const int64_t train_size = std::stoll(share_text(group, servers, server ? "" : std::to_string(task->train_size())));
  const std::string about = share_text(group, servers, rank == servers ? task->describe() : "");
  const auto [steps_per_epoch, total_steps] = run_length(cfg, bs, train_size);
  auto model = model_to_train(cfg, lead);
  const zero::EngineOptions eo = engine_options(cfg, bs);
  const comm::GroupPtr worker_group = group.split(server ? 1 : 0, rank);  // the servers' is unused
  // 16-bit runs: the workers choose their product path (Note [16-bit products]); servers run none.
  nlohmann::json products = nullptr;
  if (eo.dtype != DType::f32) {
    std::optional<zero::ProductsChoice> p;
    if (!server)
      p = zero::choose_products(*worker_group, eo.dtype, cfg.run.bf16_products, product_shape(cfg, *model, bs.micro));
    const std::string said =
        share_text(group, servers, p ? p->line(eo.dtype) + "\n" + products_record(p, eo.dtype).dump() : "");
    products = nlohmann::json::parse(said.substr(said.find('\n') + 1));
    if (lead) std::fprintf(stderr, "zerotrain: %s\n", said.substr(0, said.find('\n')).c_str());
  }
  zero::ParamServer ps(*model, std::shared_ptr<comm::Group>(&group, [](comm::Group*) {}), eo, servers);
  auto schedule = optim::make_schedule(cfg.scheduler.type, cfg.scheduler.params, cfg.optimizer.lr, total_steps);

  if (lead) {
    on_lead([&] {
      run_dir->append_metrics({{"event", "start"},
                               {"world_size", world},
                               {"strategy", "parameter_server"},
                               {"parameter_servers", servers},
                               {"workers", workers},
                               {"total_steps", total_steps},
                               {"threads", threads},
                               {"processor", processor_record()},
                               {"comm_backend", group.backend()},
                               {"memory_plan",
                                {{"server", ps_memory_json(zero::ps_memory(ps.plan(), true))},
                                 {"worker", ps_memory_json(zero::ps_memory(ps.plan(), false))}}},
                               {"products", products},
                               {"config", cfg.raw}});
    });
    std::fprintf(stderr,
                 "zerotrain: %lld parameters (%lld padded), parameter server: %d server%s (ranks 0-%d) and %d "
                 "worker%s, batch %lld = %lld micro x %lld accumulation x %d, %lld steps%s\n",
                 (long long)ps.num_params(), (long long)ps.padded_params(), servers, servers == 1 ? "" : "s",
                 servers - 1, workers, workers == 1 ? "" : "s", (long long)bs.train_batch_size, (long long)bs.micro,
                 (long long)bs.accumulation, workers, (long long)total_steps,
                 cfg.zero.stage != 0 ? " (zero_optimization.stage is not used)" : "");
    std::fprintf(stderr, "zerotrain: rank 0: %s; %s; comm backend %s%s\n", threads.c_str(), processor_note().c_str(),
                 group.backend(),
                 eo.device.is_cpu() ? ""
                                    : ("; every rank's buffers on " + eo.device.str() + ", pushes and pulls staged " +
                                       "through the host")
                                          .c_str());
    if (!about.empty()) std::fprintf(stderr, "%s\n", about.c_str());
  }
  auto run_eval_pass = [&](bool whole) {
    EvalResult ev;
    if (!server) {
      autograd::NoGradGuard no_grad;
      model->train(false);
      ev = task->evaluate([&](const std::vector<Tensor>& in) { return ps.forward(in); }, *worker_group,
                          task->eval_batch(bs.micro), whole);
      model->train(true);
    }
    return share_eval(group, servers, ev);
  };

  const auto t0 = Clock::now();
  auto last = t0;
  int64_t last_step = 0;
  std::vector<int64_t> order;
  int64_t order_epoch = -1;
  double loss_sum = 0;
  int64_t loss_count = 0;
  zero::CommOverlap push_overlap, pull_overlap;
  const int wi = rank - servers;  // this worker's share of each micro-batch of the global batch
  for (int64_t step = 0; step < total_steps; ++step) {
    const int64_t epoch = step / steps_per_epoch, in_epoch = step % steps_per_epoch;
    double step_loss = 0;
    if (!server) {
      if (epoch != order_epoch) {
        order = data::epoch_order(train_size, cfg.seed, epoch, cfg.data.shuffle);
        order_epoch = epoch;
      }
      step_loss = train_micro_batches(
          *task, order, bs, cfg.seed, {step, epoch, in_epoch}, workers, wi,
          [&](const std::vector<Tensor>& in) { return ps.forward(in); }, [&](const Tensor& l) { ps.backward(l); });
    }
    const double lr = schedule->lr(ps.optimizer_steps());
    const zero::StepStats st = ps.step(lr);
    push_overlap += st.reduce;
    pull_overlap += st.gather;
    const bool bad_loss = !std::isfinite(step_loss);
    stop_if_voted(agree(group, {stop_signal(), bad_loss ? rank : -1, on_lead.failed()},
                        "step " + std::to_string(step + 1) + ", stop vote"),
                  on_lead, "at step " + std::to_string(step + 1) + " of " + std::to_string(total_steps), cfg.run.dir);
    loss_sum += step_loss;
    ++loss_count;
    if (cfg.data.eval_every > 0 && (step + 1) % cfg.data.eval_every == 0 && step + 1 != total_steps) {
      EvalResult ev = run_eval_pass(/*whole=*/false);
      if (lead) std::fprintf(stderr, "step %lld: %s\n", (long long)(step + 1), ev.line.c_str());
      ev.metrics["step"] = step + 1;
      on_lead([&] { run_dir->append_metrics(ev.metrics); });
    }
    if ((step + 1) % std::max<int64_t>(1, cfg.steps_per_print) != 0 && step + 1 != total_steps) continue;
    const std::string at = "step " + std::to_string(step + 1);
    const double loss_avg = group.all_reduce_scalar(loss_sum / double(loss_count), at + ", loss report") / workers;
    const nlohmann::json per_rank = memory_per_rank(group, server, eo.device);
    loss_sum = 0;
    loss_count = 0;
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - last).count();
    const double elapsed = std::chrono::duration<double>(now - t0).count();
    const double sps = double((step + 1 - last_step) * bs.train_batch_size) / std::max(dt, 1e-9);
    const double eta = elapsed / double(step + 1) * double(total_steps - step - 1);
    last = now;
    last_step = step + 1;
    if (!lead) continue;
    char rate[32];
    std::snprintf(rate, sizeof rate, sps < 10 ? "%.3g" : "%.0f", sps);
    std::fprintf(stderr,
                 "step %lld/%lld | epoch %.2f | loss %.4f | lr %.2e | grad-norm %.3f | %s samples/s | ETA %s | %s\n",
                 (long long)(step + 1), (long long)total_steps, double(step + 1) / double(steps_per_epoch), loss_avg,
                 lr, st.grad_norm, rate, fmt_eta(eta).c_str(), mem_summary().c_str());
    nlohmann::json rec = {{"step", step + 1},
                          {"epoch", double(step + 1) / double(steps_per_epoch)},
                          {"loss", loss_avg},
                          {"lr", lr},
                          {"grad_norm", st.grad_norm},
                          {"samples_per_s", sps},
                          {"elapsed_s", elapsed},
                          {"comm_bytes", group.stats().total_bytes()},
                          {"memory_per_rank", per_rank},
                          {"skipped_steps", 0}};
    add_memory_fields(rec);
    rec["comm_overlap"] = {{"push_blocked_s", push_overlap.blocked_s}, {"pull_blocked_s", pull_overlap.blocked_s}};
    push_overlap = pull_overlap = {};
    on_lead([&] { run_dir->append_metrics(rec); });
  }
  const double train_s = std::chrono::duration<double>(Clock::now() - t0).count();

  std::optional<EvalResult> final_eval = eval_at_end(cfg, run_eval_pass, on_lead, run_dir, total_steps);
  nlohmann::json summary = {{"steps", total_steps},
                            {"train_seconds", train_s},
                            {"world_size", world},
                            {"strategy", "parameter_server"},
                            {"parameter_servers", servers},
                            {"parameters", ps.num_params()},
                            {"dtype", dtype_name(ps.param_dtype())},
                            {"skipped_steps", 0},
                            {"weights_saved", cfg.run.save_weights},
                            {"samples_per_s", double(total_steps * bs.train_batch_size) / train_s},
                            {"comm_bytes_rank0", group.stats().total_bytes()}};
  finish_run(cfg, group, on_lead, run_dir,
             {ps.full_param_shapes(),
              [&](const auto& fn) { ps.for_each_full_param(fn); },
              std::move(summary),
              std::move(final_eval),
              total_steps,
              train_s,
              nullptr});
  return 0;
}

}  // namespace zt::apps
