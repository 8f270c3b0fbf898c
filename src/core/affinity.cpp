#include "zt/core/affinity.h"

#include <hwloc.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

namespace zt {

namespace {

struct Topology {
  hwloc_topology_t t = nullptr;
  Topology() {
    if (hwloc_topology_init(&t) != 0) t = nullptr;
    if (t && hwloc_topology_load(t) != 0) {
      hwloc_topology_destroy(t);
      t = nullptr;
    }
  }
  ~Topology() {
    if (t) hwloc_topology_destroy(t);
  }
};

struct Bitmap {
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  ~Bitmap() { hwloc_bitmap_free(b); }
};

int processing_units(hwloc_const_bitmap_t set) { return std::max(0, hwloc_bitmap_weight(set)); }

}  // namespace

ThreadChoice choose_threads(int allowed_pus, int bound_pus, int local_size) {
  local_size = std::max(1, local_size);
  const int fair = std::max(1, allowed_pus / local_size);
  if (bound_pus < 0 || bound_pus >= fair) return {fair, ""};  // a socket's binding may hold other ranks too
  const int bound = std::max(1, bound_pus);
  const std::string pus = std::to_string(bound) + " processing unit" + (bound == 1 ? "" : "s");
  return {bound, "bound to " + pus + " of " + std::to_string(allowed_pus) + "; under mpirun, --bind-to none or " +
                     "--map-by slot:PE=" + std::to_string(fair) + " gives each rank " + std::to_string(fair)};
}

ThreadChoice default_threads(int local_size) {
  Topology topo;
  if (!topo.t) return choose_threads(int(std::thread::hardware_concurrency()), -1, local_size);
  const hwloc_const_bitmap_t allowed = hwloc_topology_get_allowed_cpuset(topo.t);
  Bitmap mine;
  if (hwloc_get_cpubind(topo.t, mine.b, HWLOC_CPUBIND_PROCESS) != 0 || hwloc_bitmap_isequal(mine.b, allowed))
    return choose_threads(processing_units(allowed), -1, local_size);
  hwloc_bitmap_and(mine.b, mine.b, allowed);
  return choose_threads(processing_units(allowed), processing_units(mine.b), local_size);
}

CoreShare share_cores(int cores, int bound_cores, int local_rank, int local_size, int threads) {
  // A launcher that bound this rank gave it its share; else it takes 1/local_size of the cores.
  const bool narrowed = bound_cores >= 0;
  CoreShare s{0, narrowed ? bound_cores : cores, ""};
  if (!narrowed && local_size > 1) {
    s.count = cores / local_size;
    s.first = local_rank * s.count;
  }
  if (s.count == 0)
    s.skip = "not pinned: " + std::to_string(local_size) + " ranks share " + std::to_string(cores) + " core" +
             (cores == 1 ? "" : "s");
  else if (!narrowed && local_size == 1 && threads < s.count)  // a lone process leaves free cores to others, as PyTorch
    s.skip = "not pinned: " + std::to_string(threads) + " of " + std::to_string(s.count) + " cores";
  else if (narrowed && local_size > 1 && threads < s.count && s.count * local_size > cores)
    // A binding wider than the rank's share (mpirun binds to a socket above 2 ranks) may be another
    // rank's too: pinning both to its first cores would stack them, so the OS places the threads.
    s.skip = "not pinned: this rank is bound to " + std::to_string(s.count) + " of " + std::to_string(cores) +
             " cores, more than its share (" + std::to_string(local_size) +
             " ranks): other ranks may be bound there too";
  else if (threads > s.count)
    s.skip = "not pinned: " + std::to_string(threads) + " threads on " + std::to_string(s.count) + " core" +
             (s.count == 1 ? "" : "s");
  return s;
}

Pinning pin_threads(int local_rank, int local_size, int threads) {
  Pinning out;
  Topology topo;
  if (!topo.t) return {{}, "not pinned: hwloc could not read the topology"};
  Bitmap mine;
  if (hwloc_get_cpubind(topo.t, mine.b, HWLOC_CPUBIND_PROCESS) != 0)
    hwloc_bitmap_copy(mine.b, hwloc_topology_get_allowed_cpuset(topo.t));
  // Cores with at least one processing unit this process may run on.
  std::vector<hwloc_obj_t> cores;
  const int n = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_CORE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t c = hwloc_get_obj_by_type(topo.t, HWLOC_OBJ_CORE, i);
    if (hwloc_bitmap_intersects(c->cpuset, mine.b)) cores.push_back(c);
  }
  const bool narrowed = !hwloc_bitmap_isequal(mine.b, hwloc_topology_get_allowed_cpuset(topo.t));
  const CoreShare share = share_cores(n, narrowed ? int(cores.size()) : -1, local_rank, local_size, threads);
  if (!share.skip.empty()) return {{}, share.skip};
  const size_t first = size_t(share.first);
  std::atomic<int> failed{0};
  std::vector<int> os(size_t(threads), -1);
#pragma omp parallel num_threads(threads)
  {
    const size_t i = size_t(omp_get_thread_num());
    hwloc_obj_t core = cores[first + i];
    Bitmap one;
    hwloc_bitmap_copy(one.b, core->cpuset);
    hwloc_bitmap_singlify(one.b);  // one hardware thread of the core
    if (hwloc_set_cpubind(topo.t, one.b, HWLOC_CPUBIND_THREAD) != 0) failed = 1;
    os[i] = int(core->os_index);
  }
  if (failed) return {{}, "not pinned: hwloc_set_cpubind failed"};
  out.cores = os;
  out.note = "pinned to core";
  out.note += threads == 1 ? " " : "s ";
  for (size_t i = 0; i < os.size(); ++i) {
    if (i) out.note += ',';
    out.note += std::to_string(os[i]);
  }
  return out;
}

}  // namespace zt
