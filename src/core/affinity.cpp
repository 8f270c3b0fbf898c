#include "zt/core/affinity.h"

#include <hwloc.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
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

std::vector<hwloc_obj_t> cores_in(hwloc_topology_t t, hwloc_const_bitmap_t set) {
  std::vector<hwloc_obj_t> cores;  // with at least one processing unit in set
  const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t c = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, i);
    if (hwloc_bitmap_intersects(c->cpuset, set)) cores.push_back(c);
  }
  return cores;
}

// This thread's mask within what the machine allows (the allowed set where it cannot be read).
void my_mask(hwloc_topology_t t, hwloc_bitmap_t mine) {
  const hwloc_const_bitmap_t allowed = hwloc_topology_get_allowed_cpuset(t);
  if (hwloc_get_cpubind(t, mine, HWLOC_CPUBIND_THREAD) != 0) hwloc_bitmap_copy(mine, allowed);
  hwloc_bitmap_and(mine, mine, allowed);
  if (hwloc_bitmap_iszero(mine)) hwloc_bitmap_copy(mine, allowed);
}

CpuView view_of(hwloc_topology_t t, hwloc_const_bitmap_t mine) {
  const hwloc_const_bitmap_t allowed = hwloc_topology_get_allowed_cpuset(t);
  return {{processing_units(allowed), int(cores_in(t, allowed).size())},
          {processing_units(mine), int(cores_in(t, mine).size())}};
}

std::string count_of(int n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

}  // namespace

LocalRank local_rank_from_env() {
  auto number = [](const char* name, int fallback) {
    const char* s = std::getenv(name);
    return s ? std::max(0, std::atoi(s)) : fallback;
  };
  const char* bound = std::getenv("OMPI_MCA_orte_bound_at_launch");
  return {number("OMPI_COMM_WORLD_LOCAL_RANK", 0), std::max(1, number("OMPI_COMM_WORLD_LOCAL_SIZE", 1)),
          bound && std::string(bound) == "1"};
}

CpuView cpu_view() {
  Topology topo;
  if (!topo.t) {
    const int n = std::max(1, int(std::thread::hardware_concurrency()));
    return {{n, n}, {n, n}};
  }
  Bitmap mine;
  my_mask(topo.t, mine.b);
  return view_of(topo.t, mine.b);
}

ThreadChoice choose_threads(const CpuView& v, bool rank_bound, int local_size) {
  local_size = std::max(1, local_size);
  rank_bound = rank_bound && v.mine.pus < v.machine.pus;  // a binding to the whole machine says nothing
  const int mine = std::max(1, v.mine.pus);
  if (!rank_bound) {
    ThreadChoice c{std::max(1, mine / local_size), ""};
    if (local_size == 1 && v.mine.pus < v.machine.pus)
      c.note = "bound to " + count_of(mine, "processing unit") + " of " + std::to_string(v.machine.pus);
    return c;
  }
  const int fair = std::max(1, v.machine.pus / local_size);
  if (mine >= fair) return {fair, ""};                       // a socket's binding may hold other ranks too
  const int pe = std::max(1, v.machine.cores / local_size);  // mpirun's PE counts cores
  return {mine, "mpirun bound this rank to " + count_of(mine, "processing unit") + " of " +
                    std::to_string(v.machine.pus) + "; --bind-to none, or --map-by slot:PE=" + std::to_string(pe) +
                    ", gives each rank " + std::to_string(fair)};
}

CoreShare share_cores(const CpuView& v, bool rank_bound, int local_rank, int local_size, int threads) {
  local_size = std::max(1, local_size);
  rank_bound = rank_bound && v.mine.pus < v.machine.pus;
  const int cores = v.mine.cores;
  CoreShare s{0, cores, ""};
  if (!rank_bound && local_size > 1) {
    s.count = cores / local_size;
    s.first = local_rank * s.count;
  }
  if (s.count == 0)
    s.skip = "not pinned: " + std::to_string(local_size) + " ranks share " + count_of(cores, "core");
  else if (!rank_bound && local_size == 1 && cores == v.machine.cores && threads < s.count)
    s.skip = "not pinned: " + std::to_string(threads) + " of " + count_of(s.count, "core");
  else if (rank_bound && local_size > 1 && threads < s.count && s.count * local_size > v.machine.cores)
    s.skip = "not pinned: this rank is bound to " + std::to_string(s.count) + " of " + std::to_string(v.machine.cores) +
             " cores, more than its share (" + std::to_string(local_size) +
             " ranks): other ranks may be bound there too";
  else if (threads > s.count)
    s.skip = "not pinned: " + std::to_string(threads) + " threads on " + count_of(s.count, "core");
  return s;
}

Pinning pin_threads(int local_rank, int local_size, int threads, bool rank_bound) {
  Pinning out;
  Topology topo;
  if (!topo.t) return {{}, "not pinned: hwloc could not read the topology"};
  Bitmap mine;
  my_mask(topo.t, mine.b);
  const std::vector<hwloc_obj_t> cores = cores_in(topo.t, mine.b);
  const CoreShare share = share_cores(view_of(topo.t, mine.b), rank_bound, local_rank, local_size, threads);
  if (!share.skip.empty()) return {{}, share.skip};
  const size_t first = size_t(share.first);
  std::atomic<int> failed{0};
  std::vector<int> os(size_t(threads), -1);
#pragma omp parallel num_threads(threads)
  {
    const size_t i = size_t(omp_get_thread_num());
    hwloc_obj_t core = cores[first + i];
    Bitmap one;
    hwloc_bitmap_and(one.b, core->cpuset, mine.b);
    hwloc_bitmap_singlify(one.b);  // one hardware thread of the core that the mask holds
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
