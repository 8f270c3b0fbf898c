#include "zt/train/stops.h"

#include <csignal>

#include "zt/core/tensor.h"

namespace zt::train {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal == 0) g_stop_signal = sig;
}
}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes go on; the flag is read between steps
  for (int sig : {SIGTERM, SIGINT}) sigaction(sig, &sa, nullptr);
}

int stop_signal() { return int(g_stop_signal); }

Vote agree(comm::Group& group, const Vote& mine, const std::string& label) {
  Tensor t = Tensor::from_ints({mine.signal, mine.bad_loss_rank + 1, mine.lead_failed ? 1 : 0}, {3});
  group.all_reduce(t, {comm::ReduceOp::max, label});
  const int32_t* v = t.data<int32_t>();
  return Vote{v[0], v[1] - 1, v[2] != 0};
}

void stop_if_voted(const Vote& v, const std::string& when, const std::string& kept, const std::string& lead_error,
                   ErrorKind lead_kind) {
  if (v.lead_failed) throw AgreedStop(lead_error + kept, lead_kind, 1);
  if (v.bad_loss_rank >= 0)
    throw AgreedStop(detail::concat("[train] the loss is not finite ", when, " on rank ", v.bad_loss_rank,
                                    ": training diverged (lower optimizer.params.lr or set gradient_clipping)", kept),
                     ErrorKind::config, 1);
  if (v.signal)
    throw AgreedStop(detail::concat("interrupted by ", v.signal == SIGINT ? "SIGINT" : "SIGTERM", " ", when,
                                    ", every rank stopped", kept),
                     ErrorKind::internal, 128 + v.signal);
}

}  // namespace zt::train
