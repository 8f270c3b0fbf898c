#pragma once
// Note [one training loop]: `zerotrain train` is one loop (train.cpp) over a Trainer, the
// strategy that computes the steps: the ZeRO engine (zero_trainer.cpp) or the parameter server
// (ps_trainer.cpp). The loop owns the order of the data, the stop votes, the evaluation cadence,
// the loss report, progress, the metrics records and the committed outputs; a strategy adds its
// fields to the start record, each step's record and the summary, and says its start lines.
// Adding a strategy never touches the loop.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fault.h"
#include "tasks.h"
#include "train_common.h"
#include "zt/comm/group.h"
#include "zt/config/config.h"
#include "zt/zero/engine_options.h"

namespace zt::apps {

// What a strategy is built from: the validated config, the world, the batch layout and the
// fault plan (its checkpoint hook).
struct TrainerContext {
  const config::Config& cfg;
  comm::Group& group;
  config::BatchSizes bs;
  const FaultPlan& fault;
};

class Trainer {
 public:
  virtual ~Trainer() = default;

  // ---- the data and the run's length (known once the trainer is built) ----
  virtual const Task* task() const = 0;  // null on a rank that reads no data (a server)
  virtual int64_t train_size() const = 0;
  virtual std::string describe() const = 0;  // the data's baselines, for rank 0 to print
  // Ranks that compute a share of each global batch, and this rank's share (-1: none).
  virtual int workers() const = 0;
  virtual int worker() const = 0;
  // A resumed run: the checkpoint ("" when none), its step, and the fp16-skipped steps behind it.
  virtual std::string resumed_from() const { return {}; }
  virtual int64_t first_step() const { return 0; }
  virtual int64_t skipped_before() const { return 0; }

  // ---- a step ----
  virtual Device device() const = 0;  // where the model computes: batches go up to it
  virtual Tensor forward(const std::vector<Tensor>& in) = 0;
  virtual void backward(const Tensor& loss) = 0;
  // The coming step's learning rate, before its micro-batches (the engine may update behind backward).
  virtual void begin_step(double /*lr*/) {}
  virtual zero::StepStats step(double lr) = 0;
  virtual int64_t optimizer_steps() const = 0;  // applied updates: what the schedule follows
  virtual std::optional<double> loss_scale() const { return std::nullopt; }  // fp16's, where it scales
  // Every rank calls it; the result is on every rank.
  virtual EvalResult evaluate(bool whole) = 0;

  // ---- checkpoints (a strategy without them keeps these as they are) ----
  virtual void after_step(int64_t steps_done, int64_t total_steps, int64_t skipped) {
    (void)steps_done, (void)total_steps, (void)skipped;
  }
  virtual void before_stop() {}  // an agreed stop: what is written in the background is committed
  virtual std::string last_checkpoint() const { return {}; }  // the folder this run committed last, or ""
  virtual void end_of_steps() {}  // the run's last checkpoint committed

  // ---- what the run says ----
  virtual nlohmann::json start_fields() = 0;  // the start record's fields of the strategy (rank 0)
  virtual std::vector<std::string> start_lines(int64_t total_steps, const std::string& threads) = 0;
  virtual std::string memory_line() const = 0;  // the progress line's memory part
  // A printed step's fields of the strategy: every rank calls it (it may gather from every rank).
  virtual nlohmann::json step_fields() = 0;
  virtual nlohmann::json summary_fields() = 0;  // parameters, dtype, comm_bytes_rank0, ...

  // ---- the consolidated weights (every rank takes part in the gathers) ----
  virtual std::vector<std::pair<std::string, Shape>> full_param_shapes() const = 0;
  virtual void for_each_full_param(const std::function<void(const std::string&, const Tensor&)>& fn) = 0;
};

// run.strategy's trainer (trainer.cpp): "zero" or "parameter_server".
std::unique_ptr<Trainer> make_trainer(const TrainerContext& ctx);
std::unique_ptr<Trainer> make_zero_trainer(const TrainerContext& ctx);
std::unique_ptr<Trainer> make_ps_trainer(const TrainerContext& ctx);

}  // namespace zt::apps
