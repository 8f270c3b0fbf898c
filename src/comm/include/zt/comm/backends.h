#pragma once
// The one list of communication backends by name: make_group builds each, run.comm_backend takes
// them or auto, and tests/docs/check_docs.py asks the binary for that choice's list.
#include <string>
#include <vector>

namespace zt::comm {

// The backends make_group builds by name (group.h); a new one is added here (docs/extending.md).
inline const std::vector<std::string>& named_backends() {
  static const std::vector<std::string> names{"local", "mpi", "shm", "nccl"};
  return names;
}

// run.comm_backend's choices: auto (Note [backend choice]), then every named backend.
inline std::vector<std::string> backend_choices() {
  std::vector<std::string> all{"auto"};
  all.insert(all.end(), named_backends().begin(), named_backends().end());
  return all;
}

}  // namespace zt::comm
