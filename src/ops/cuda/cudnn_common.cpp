// The process's cuDNN handles, one per GPU (cudnn_common.h).
#include "cudnn_common.h"

#include <mutex>
#include <unordered_map>

namespace zt::ops::cuda {

cudnnHandle_t handle_for(int index) {
  static std::mutex mu;
  static auto* handles = new std::unordered_map<int, cudnnHandle_t>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  cudnnHandle_t& h = (*handles)[index];
  if (!h) ZT_DNN_CHECK(cudnnCreate(&h));
  return h;
}

}  // namespace zt::ops::cuda
