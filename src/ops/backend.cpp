// The backends compiled into zt_ops. A CUDA build adds "cuda" from its own file.
#include "zt/ops/ops.h"

namespace zt::ops {

std::vector<std::string> backends() { return {"cpu"}; }

}  // namespace zt::ops
