#pragma once
// Note [ending a job whose host stopped] in launcher_watchdog.cpp.

namespace zt::apps {

// Before MPI_Abort: if this rank's launcher (mpirun or its host's orted) is still alive
// `grace_ms` later, a detached watchdog kills it, so the job ends even when a stopped host never
// answers the teardown. No-op without a pidfd or a launcher.
void watch_launcher_after_abort(int grace_ms);

}  // namespace zt::apps
