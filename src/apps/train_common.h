#pragma once
// What the training loop (train.cpp) and its strategies (zero_trainer.cpp, ps_trainer.cpp)
// share: the threads, rank 0's work on the run directory, agreed stops, the data stream seeds,
// and the memory fields of a metrics record.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_dir.h"
#include "tasks.h"
#include "zt/comm/group.h"
#include "zt/config/config.h"
#include "zt/core/tensor.h"
#include "zt/nn/module.h"
#include "zt/train/batches.h"
#include "zt/train/stops.h"
#include "zt/zero/products.h"

namespace zt::apps {

// The train layer's pieces the command's files name unqualified (Note [train layer]).
using train::agree;
using train::AgreedStop;
using train::BatchKey;
using train::BatchPrefetcher;
using train::install_stop_signals;
using train::stop_signal;
using train::Vote;
// Threads per rank: the configured number, else Note [default threads]'s (the rank's share of the
// cores it may use); then each thread is pinned to a core of that share (run.pin_threads).
std::string pick_threads(const config::Config& c);
// The processor path the run computes on (Note [processor cap]): "avx2 (capped by
// ONEDNN_MAX_CPU_ISA=AVX2)", and the same as the start record's "processor".
std::string processor_note();
// What to change when fp16 steps keep overflowing: the static scale, or the dynamic scale's
// start and floor (which one the config uses, with its values).
std::string overflow_advice(const config::Fp16Config& f);
nlohmann::json processor_record();

// Rank 0's work on the run directory: its first error is kept for the next vote instead of
// thrown, so that no other rank is left waiting (Note [agreed stops]).
struct LeadWork {
  explicit LeadWork(bool is_lead) : lead(is_lead) {}
  bool lead;
  ErrorKind kind = ErrorKind::internal;
  std::string error;

  template <typename Fn>
  void operator()(Fn&& fn) {
    if (!lead || !error.empty()) return;
    try {
      fn();
    } catch (const Error& e) {
      kind = e.kind();
      error = e.what();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  bool failed() const { return !error.empty(); }
};

// Turns a vote to stop into the same AgreedStop on every rank; `when` is "at step 3 of 10".
// Until the final commit nothing saved has changed, and the message says so (and names the run's
// last committed checkpoint, where it saved one).
void stop_if_voted(const Vote& v, const LeadWork& lead, const std::string& when, const std::string& dir,
                   bool before_commit = true, const std::string& checkpoint = "");
// Weights that are NaN or infinite are never saved over earlier ones.
void check_finite(const std::string& name, const Tensor& t, int64_t steps);
// Global batch layout: micro-batch m of every data-parallel rank, rank-major inside each
// micro-batch. The first sample of `rank`'s micro-batch m (of `ranks`) in step `in_epoch` of its
// epoch, and that micro-batch's index in the global batch.
inline int64_t micro_index(int64_t m, int ranks, int rank) { return m * ranks + rank; }
inline int64_t micro_begin(const config::BatchSizes& bs, int64_t in_epoch, int64_t m, int ranks, int rank) {
  return in_epoch * bs.train_batch_size + micro_index(m, ranks, rank) * bs.micro;
}
// Dropout masks: a stream per (seed, step, micro-batch of the global batch).
uint64_t dropout_stream_seed(uint64_t seed, int64_t step, int64_t micro);
// run.epochs in steps, rounded, at least 1; a count past int64 is a config error.
int64_t steps_for_epochs(double epochs, int64_t steps_per_epoch);
// The products a 16-bit run times to choose its path (Note [16-bit products]).
zero::ProductShape product_shape(const config::Config& c, const nn::Module& model, int64_t micro);
// The start record's "products" (null for an f32 run).
nlohmann::json products_record(const std::optional<zero::ProductsChoice>& p, DType dt, bool f32_compute = false);
// This rank's allocator by tag (now and peak), "peak", "cached", and the OS's peak RSS, into
// rec's "memory", "memory_peak" and "rss_peak".
void add_memory_fields(nlohmann::json& rec, Device device = Device::cpu());

// The training data on the ranks that `read` it (make_task): a bad file is one agreed error on
// every rank, said once (the lowest failing rank's). Null where `read` is false.
std::unique_ptr<Task> load_task_agreed(const config::Config& cfg, comm::Group& group, bool read = true);

// Steps per epoch of `train_size` samples (a config error when one global batch exceeds them),
// and the run's steps: run.max_steps, else run.epochs of them.
struct RunLength {
  int64_t steps_per_epoch = 0, total_steps = 0;
};
RunLength run_length(const config::Config& cfg, const config::BatchSizes& bs, int64_t train_size);
// The model, deferred unless model.init_from fine-tunes saved weights (loaded by name; rank 0
// says what was loaded when `say`).
std::shared_ptr<nn::Module> model_to_train(const config::Config& cfg, bool say);

// One step's micro-batches on data-parallel rank `rank` of `ranks`, in the global batch layout
// (micro_begin): each taken (`take(m)`: gathered, or prefetched on a device), with its dropout
// stream (replayed by activation checkpointing), its loss weighted for the global batch
// (Task::weight), forward and backward. Returns this rank's mean loss over the micro-batches.
struct StepPlace {
  int64_t step = 0, epoch = 0, in_epoch = 0;
};
double train_micro_batches(const Task& task, const std::vector<int64_t>& order, const config::BatchSizes& bs,
                           uint64_t seed, StepPlace at, int ranks, int rank,
                           const std::function<MicroBatch(int64_t)>& take,
                           const std::function<Tensor(const std::vector<Tensor>&)>& forward,
                           const std::function<void(const Tensor&)>& backward);
// Micro-batch m of step `at` on that rank (`order`: the data order of at.epoch), on the host.
MicroBatch gather_micro_batch(const Task& task, const std::vector<int64_t>& order, const config::BatchSizes& bs,
                              StepPlace at, int64_t m, int ranks, int rank);

// A training rank's micro-batches by step: the epochs' data orders (the current and the next one,
// computed once each) and, on a device, the prefetcher.
class StepBatches {
 public:
  struct Run {
    int64_t steps_per_epoch = 1, total_steps = 0;
    uint64_t seed = 0;
    bool shuffle = true;
    int ranks = 1, rank = 0;
  };
  StepBatches(const Task& task, const config::BatchSizes& bs, Run run, Device device);
  StepPlace place(int64_t step) const;
  const std::vector<int64_t>& order(int64_t epoch);  // valid until an order two epochs later is asked for
  // Micro-batch m of step `at`: on the host for a cpu run, else on the device (the next one sent up).
  MicroBatch take(StepPlace at, int64_t m);

 private:
  MicroBatch gather(BatchKey key);

  const Task& task_;
  config::BatchSizes bs_;
  Run run_;
  std::map<int64_t, std::vector<int64_t>> orders_;
  std::optional<BatchPrefetcher> prefetch_;
};

// run.eval_at_end: the whole validation pass (`pass(true)`), and with data.eval_every its last
// point on the validation curve; nullopt when the run does not evaluate at the end.
std::optional<EvalResult> eval_at_end(const config::Config& cfg, const std::function<EvalResult(bool)>& pass,
                                      LeadWork& on_lead, std::unique_ptr<RunDir>& run_dir, int64_t steps);

// The end of a training run, on every rank (Note [agreed stops]): rank 0 writes the consolidated
// weights (fp32, streamed as `each` yields them; every rank takes part in its gathers) and the
// summary under temporary names, a vote, the commit, a vote; then it prints the final lines.
// `before_stage` runs on rank 0 first (the fault injector's final-save hook).
struct FinalOutputs {
  std::vector<std::pair<std::string, Shape>> shapes;  // what `each` yields, in its order
  std::function<void(const std::function<void(const std::string&, const Tensor&)>&)> each;
  nlohmann::json summary;
  std::optional<EvalResult> final_eval;
  int64_t steps = 0;
  double train_s = 0;
  double startup_s = 0, eval_s = 0;  // the end line counts them apart (Note [step cost])
  std::function<void()> before_stage;
};
void finish_run(const config::Config& cfg, comm::Group& group, LeadWork& on_lead, std::unique_ptr<RunDir>& run_dir,
                FinalOutputs out);

}  // namespace zt::apps
