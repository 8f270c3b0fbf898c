#include "zt/core/parallel.h"

#include <omp.h>

#include <atomic>

namespace zt {

namespace {
std::atomic<int> g_threads{0};  // set_num_threads' count (0: OpenMP's default)
}  // namespace

int num_threads() { return omp_get_max_threads(); }
void set_num_threads(int n) {
  if (n <= 0) return;
  g_threads.store(n);
  omp_set_num_threads(n);
}
ThreadCountGuard::ThreadCountGuard(int n) : was_(omp_get_max_threads()) { omp_set_num_threads(n); }
ThreadCountGuard::~ThreadCountGuard() { omp_set_num_threads(was_); }

void adopt_num_threads() {
  const int n = g_threads.load();
  if (n > 0 && omp_get_max_threads() != n) omp_set_num_threads(n);
}

}  // namespace zt
