#include "zt/core/affinity.h"

#include <hwloc.h>
#include <omp.h>

#include <atomic>
#include <memory>

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

}  // namespace

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
  // A launcher that bound this rank already gave it its share; else take 1/local_size of them.
  const bool narrowed = !hwloc_bitmap_isequal(mine.b, hwloc_topology_get_allowed_cpuset(topo.t));
  size_t first = 0, share = cores.size();
  if (!narrowed && local_size > 1) {
    share = cores.size() / size_t(local_size);
    first = size_t(local_rank) * share;
  }
  if (share == 0)
    return {{},
            "not pinned: " + std::to_string(local_size) + " ranks share " + std::to_string(cores.size()) + " core" +
                (cores.size() == 1 ? "" : "s")};
  // A process alone that leaves cores free leaves them to others (as PyTorch does): no pinning.
  if (!narrowed && local_size == 1 && size_t(threads) < share)
    return {{}, "not pinned: " + std::to_string(threads) + " of " + std::to_string(share) + " cores"};
  if (size_t(threads) > share)
    return {{},
            "not pinned: " + std::to_string(threads) + " threads on " + std::to_string(share) + " core" +
                (share == 1 ? "" : "s")};
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
  for (size_t i = 0; i < os.size(); ++i) out.note += (i ? "," : "") + std::to_string(os[i]);
  return out;
}

}  // namespace zt
