#pragma once
// Thin OpenMP helpers so kernels share one threading policy.
#include <cstdint>

namespace zt {

int num_threads();
void set_num_threads(int n);
// OpenMP's thread count is per thread: a worker thread that runs kernels (the sim stream) takes
// set_num_threads' count with this, so its reductions split as the caller's would.
void adopt_num_threads();
// This thread's OpenMP regions on n threads until the guard ends; set_num_threads' count (the one
// other threads adopt) is left alone.
class ThreadCountGuard {
 public:
  explicit ThreadCountGuard(int n);
  ~ThreadCountGuard();
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int was_;
};

// Runs fn(begin, end) over [0, n) split into chunks of at least `grain` elements.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= grain || num_threads() == 1) {
    if (n > 0) fn(int64_t(0), n);
    return;
  }
  int64_t chunks = (n + grain - 1) / grain;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = c * grain, e = b + grain < n ? b + grain : n;
    fn(b, e);
  }
}

}  // namespace zt
