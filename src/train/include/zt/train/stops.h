#pragma once
// Stopping every rank together: stop signals, and a vote at fixed points of a run.
//
// Note [agreed stops]: a reason to stop that one rank sees (its loss is not finite, it got
// SIGTERM, rank 0 could not write an output) is voted on in a collective with the group's
// timeout, so every rank stops at the same point and none is left waiting in a collective or
// in MPI_Finalize. Then rank 0 says why in one line and every rank exits with the same status,
// without MPI_Abort. A rank that misses the vote (it stalled, e.g. in a write to a hung
// filesystem) is named by the others' timeout, which ends the job as any comm error does.
#include <string>

#include "zt/comm/group.h"
#include "zt/core/error.h"

namespace zt::train {

// Raised on every rank alike after a vote; a program prints it on rank 0 only and exits with exit_code.
using AgreedStop = AgreedError;

// SIGTERM and SIGINT set a flag (async-signal-safe) instead of ending the process at once;
// the run reads it at its next vote.
void install_stop_signals();
int stop_signal();  // 0, or the number of the first stop signal received

struct Vote {
  int signal = 0;            // a stop signal some rank received
  int bad_loss_rank = -1;    // a rank whose loss is not finite (the highest, if several)
  bool lead_failed = false;  // rank 0 could not write an output
  bool stops() const { return signal != 0 || bad_loss_rank >= 0 || lead_failed; }
};
// Every rank's vote combined in one all_reduce (max) named `label`, with the group's timeout.
Vote agree(comm::Group& group, const Vote& mine, const std::string& label);
// A vote that stops, as the same AgreedStop on every rank: `when` is "at step 3 of 10", `kept` what
// is saved ("; this run's last checkpoint is ..."), `lead_error` rank 0's failure (of `lead_kind`).
void stop_if_voted(const Vote& v, const std::string& when, const std::string& kept = "",
                   const std::string& lead_error = "", ErrorKind lead_kind = ErrorKind::internal);

}  // namespace zt::train
