// Note [backend choice]: run.comm_backend=auto is what each trainer would pick for the job.
// On GPUs with a GPU per rank, nccl (as torchrun's and DeepSpeed's default): collectives run on
// the GPUs' own links with no copy through host memory. Where ranks share a GPU, NCCL refuses the
// communicator, so auto keeps the host group (shm on one node, mpi or shm+mpi across nodes) and
// the engine stages tensors through it (Note [staged group]); one line on stderr says why. On CPUs,
// shm under mpirun and local without it, as before; the parameter server's point-to-point
// messages need mpi. A backend named explicitly is taken as named, or refused in one line.
#include "zt/comm/group.h"
#include "zt/core/error.h"

namespace zt::comm {

BackendChoice choose_backend(const BackendSetting& s) {
  const std::string& r = s.requested;
  if (r == "nccl") {
    ZT_CHECK_AS(ErrorKind::config, s.nccl_built,
                "[config] run.comm_backend=nccl: this build has no CUDA, so no NCCL "
                "(configure with -DZT_WITH_CUDA=ON; nearest valid here: auto)");
    ZT_CHECK_AS(ErrorKind::config, s.on_gpu,
                "[config] run.comm_backend=nccl needs run.device=cuda (NCCL moves GPU "
                "memory; nearest valid for this device: auto)");
    ZT_CHECK_AS(ErrorKind::config, s.gpus >= s.local_ranks, "[config] run.comm_backend=nccl: ", s.local_ranks,
                " ranks on this node but ", s.gpus, s.gpus == 1 ? " GPU" : " GPUs",
                " (NCCL needs a GPU of its own for each rank; nearest valid: auto, which stages through host memory)");
    return {"nccl", ""};
  }
  if (r != "auto") return {r, ""};
  if (!s.under_mpirun) return {"local", ""};  // one process: nothing to communicate
  if (s.point_to_point) return {"mpi", ""};
  if (!s.on_gpu) return {"auto", ""};  // make_group("auto"): shm, or mpi where shm cannot serve the layout
  if (s.nccl_built && s.gpus >= s.local_ranks) return {"nccl", ""};
  const std::string why = !s.nccl_built
                              ? "this build has no NCCL"
                              : std::to_string(s.local_ranks) + " ranks on this node share " + std::to_string(s.gpus) +
                                    (s.gpus == 1 ? " GPU" : " GPUs") + " and NCCL needs one a rank";
  return {"auto", "run.comm_backend=auto: " + why + ", so collectives are staged through host memory"};
}

}  // namespace zt::comm
