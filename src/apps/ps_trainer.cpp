// run.strategy = parameter_server as a Trainer (Note [one training loop]; Note [parameter
// server] in zt/zero/param_server.h): ranks 0..S-1 serve, the others compute, through the same
// loop as ZeRO, without checkpoints (config::parse refuses them). Rank 0, a server, writes the run
// directory: the loss comes to it in the report's all-reduce, evaluations and the data's
// description from the first worker, and each record lists every rank's memory
// ("memory_per_rank").
#include <cstdio>
#include <cstring>

#include "memory_plan.h"
#include "session.h"
#include "trainer.h"
#include "zt/autograd/autograd.h"
#include "zt/zero/param_server.h"

namespace zt::apps {

namespace {

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
class PsTrainer : public Trainer {
 public:
  explicit PsTrainer(const TrainerContext& ctx)
      : cfg_(ctx.cfg), group_(ctx.group), bs_(ctx.bs), servers_(ctx.cfg.run.parameter_servers),
        server_(ctx.group.rank() < servers_) {
    const config::Config& cfg = cfg_;
    const bool lead = group_.rank() == 0;
    (void)open_run_device(cfg);  // Note [device cap]
    // The workers read the data; the servers hold none (the epoch's length and the description
    // come from the first worker).
    task_ = load_task_agreed(cfg, group_, /*read=*/!server_);
    train_size_ = std::stoll(share_text(group_, servers_, server_ ? "" : std::to_string(task_->train_size())));
    about_ = share_text(group_, servers_, group_.rank() == servers_ ? task_->describe() : "");
    model_ = model_to_train(cfg, lead);
    eo_ = engine_options(cfg, bs_);
    worker_group_ = group_.split(server_ ? 1 : 0, group_.rank());  // the servers' is unused
    // 16-bit runs: the workers choose their product path (Note [16-bit products]); servers run none.
    if (eo_.dtype != DType::f32) {
      std::optional<zero::ProductsChoice> p;
      if (!server_)
        p = zero::choose_products(*worker_group_, eo_.dtype, cfg.run.bf16_products,
                                  product_shape(cfg, *model_, bs_.micro));
      const std::string said =
          share_text(group_, servers_, p ? p->line(eo_.dtype) + "\n" + products_record(p, eo_.dtype).dump() : "");
      products_ = nlohmann::json::parse(said.substr(said.find('\n') + 1));
      if (lead) std::fprintf(stderr, "zerotrain: %s\n", said.substr(0, said.find('\n')).c_str());
    }
    ps_ = std::make_unique<zero::ParamServer>(*model_, std::shared_ptr<comm::Group>(&group_, [](comm::Group*) {}),
                                              eo_, servers_);
  }

  const Task* task() const override { return task_.get(); }
  int64_t train_size() const override { return train_size_; }
  std::string describe() const override { return about_; }
  int workers() const override { return group_.size() - servers_; }
  int worker() const override { return server_ ? -1 : group_.rank() - servers_; }

  Device device() const override { return eo_.device; }
  Tensor forward(const std::vector<Tensor>& in) override { return ps_->forward(in); }
  void backward(const Tensor& loss) override { ps_->backward(loss); }
  zero::StepStats step(double lr) override {
    const zero::StepStats st = ps_->step(lr);
    push_overlap_ += st.reduce;
    pull_overlap_ += st.gather;
    return st;
  }
  int64_t optimizer_steps() const override { return ps_->optimizer_steps(); }
  // The workers score it among themselves; every rank learns the first worker's result.
  EvalResult evaluate(bool whole) override {
    EvalResult ev;
    if (!server_) {
      autograd::NoGradGuard no_grad;
      model_->train(false);
      ev = task_->evaluate([&](const std::vector<Tensor>& in) { return ps_->forward(in); }, *worker_group_,
                           task_->eval_batch(bs_.micro), whole);
      model_->train(true);
    }
    return share_eval(group_, servers_, ev);
  }

  nlohmann::json start_fields() override {
    return {{"strategy", "parameter_server"},
            {"parameter_servers", servers_},
            {"workers", workers()},
            {"memory_plan",
             {{"server", ps_memory_json(zero::ps_memory(ps_->plan(), true))},
              {"worker", ps_memory_json(zero::ps_memory(ps_->plan(), false))}}},
            {"products", products_}};
  }
  std::vector<std::string> start_lines(int64_t total_steps, const std::string& threads) override {
    const int w = workers();
    return {detail::concat("zerotrain: ", ps_->num_params(), " parameters (", ps_->padded_params(),
                           " padded), parameter server: ", servers_, servers_ == 1 ? " server" : " servers",
                           " (ranks 0-", servers_ - 1, ") and ", w, w == 1 ? " worker" : " workers", ", batch ",
                           bs_.train_batch_size, " = ", bs_.micro, " micro x ", bs_.accumulation, " accumulation x ",
                           w, ", ", total_steps, " steps",
                           cfg_.zero.stage != 0 ? " (zero_optimization.stage is not used)" : ""),
            "zerotrain: rank 0: " + threads + "; " + processor_note() + "; comm backend " + group_.backend() +
                (eo_.device.is_cpu() ? ""
                                     : "; every rank's buffers on " + eo_.device.str() +
                                           ", pushes and pulls staged through the host")};
  }
  std::string memory_line() const override { return mem_summary(); }
  nlohmann::json step_fields() override {
    nlohmann::json rec = {{"comm_bytes", group_.stats().total_bytes()},
                          {"memory_per_rank", memory_per_rank(group_, server_, eo_.device)}};
    add_memory_fields(rec);
    rec["comm_overlap"] = {{"push_blocked_s", push_overlap_.blocked_s}, {"pull_blocked_s", pull_overlap_.blocked_s}};
    push_overlap_ = pull_overlap_ = {};
    return rec;
  }
  nlohmann::json summary_fields() override {
    return {{"strategy", "parameter_server"},
            {"parameter_servers", servers_},
            {"parameters", ps_->num_params()},
            {"dtype", dtype_name(ps_->param_dtype())},
            {"comm_bytes_rank0", group_.stats().total_bytes()}};
  }

  std::vector<std::pair<std::string, Shape>> full_param_shapes() const override { return ps_->full_param_shapes(); }
  void for_each_full_param(const std::function<void(const std::string&, const Tensor&)>& fn) override {
    ps_->for_each_full_param(fn);
  }

 private:
  const config::Config& cfg_;
  comm::Group& group_;
  config::BatchSizes bs_;
  int servers_;
  bool server_;
  std::unique_ptr<Task> task_;
  int64_t train_size_ = 0;
  std::string about_;
  std::shared_ptr<nn::Module> model_;
  zero::EngineOptions eo_;
  comm::GroupPtr worker_group_;
  nlohmann::json products_ = nullptr;
  std::unique_ptr<zero::ParamServer> ps_;
  zero::CommOverlap push_overlap_, pull_overlap_;  // since the last printed step
};

}  // namespace

std::unique_ptr<Trainer> make_ps_trainer(const TrainerContext& ctx) { return std::make_unique<PsTrainer>(ctx); }

}  // namespace zt::apps
