// Note [ending a job whose host stopped]: a rank that ends the job (MPI_Abort after a timeout)
// leaves the teardown to its launcher, which asks every host's daemon to kill its ranks. A host
// whose processes are stopped (SIGSTOP, a frozen VM) never answers, and mpirun would wait forever
// although every live rank has reported the failure (issue 31, probe case 6). So before aborting,
// a rank forks a watchdog in a session of its own: if the rank's launcher (its parent: mpirun, or
// its host's orted) is still alive after the grace period, the watchdog kills it, which ends
// mpirun (at once, or as "lost communication with a remote daemon"). A pidfd names the launcher,
// so a reused pid is never hit; the watchdog holds no file of the rank's (a pipe read to its end
// must not wait for it).
#include "launcher_watchdog.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

namespace zt::apps {

namespace {
// Every descriptor but `keep` (close_range where the kernel has it, else one by one).
void close_all_but(int keep) {
  if (keep > 0) syscall(SYS_close_range, 0u, unsigned(keep - 1), 0u);
  if (syscall(SYS_close_range, unsigned(keep + 1), UINT_MAX, 0u) == 0) return;
  for (int fd = 0; fd < 4096; ++fd)
    if (fd != keep) close(fd);
}
}  // namespace

void watch_launcher_after_abort(int grace_ms) {
  const pid_t launcher = getppid();
  if (launcher <= 1) return;
  const int fd = int(syscall(SYS_pidfd_open, launcher, 0u));
  if (fd < 0) return;  // a kernel before 5.3: no watchdog
  const pid_t child = fork();
  if (child != 0) {  // the rank (or no fork): it aborts as before
    close(fd);
    return;
  }
  // The watchdog: async-signal-safe calls only (the rank has other threads).
  close_all_but(fd);
  setsid();  // out of the rank's process group, which the launcher kills
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, grace_ms) == 0) syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0u);
  _exit(0);
}

}  // namespace zt::apps
