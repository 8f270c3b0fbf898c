// The kernel tables of the compiled backends (Note [kernel table]): which table serves a
// device, the device an op's inputs agree on, and the "supports" query.
#include "contract.h"
#include "kernel_table.h"
#include "zt/ops/ops.h"

namespace zt::ops {

namespace detail {

const KernelTable& table_for(Device d, const char* op) {
  if (d.is_cpu()) return cpu_table();
  if (d.type == DeviceType::sim) {
    ZT_CHECK(d.index == 0, "[", op, "] device ", d, " does not exist (there is one sim device, index 0)");
    return sim_table();
  }
  if (d.type == DeviceType::meta) return meta_table();
  const KernelTable* t = cuda_table();
  if (t == nullptr) ZT_THROW_AS(ErrorKind::invalid_argument, "[", op, "] CUDA is not available in this build");
  ZT_CHECK(is_available(d), "[", op, "] device ", d, " is not available (", cuda_device_count(), " GPUs visible)");
  return *t;
}

void check_on(Device d, const Tensor& t, const char* op) {
  if (t.defined()) ZT_CHECK(t.device() == d, "[", op, "] tensors are on different devices: ", d, " and ", t.device());
}

void throw_unsupported(const KernelTable& t, Device d, const char* kernel, const char* op) {
  ZT_THROW_AS(ErrorKind::invalid_argument, "[", op, "] the ", t.backend, " backend has no ", kernel, " kernel (device ",
              d, "; ops::supports(\"", kernel, "\", ", d, ") is false)");
}

}  // namespace detail

std::vector<std::string> backends() {
  std::vector<std::string> names{"cpu"};
  if (detail::cuda_table() != nullptr) names.push_back("cuda");
  names.push_back("sim");
  return names;
}

std::vector<std::string> kernel_names() {
  return {
#define ZT_KERNEL_NAME(name, sig) #name,
      ZT_KERNELS(ZT_KERNEL_NAME)
#undef ZT_KERNEL_NAME
  };
}

bool supports(const std::string& kernel, Device d) {
  const detail::KernelTable* t = d.is_cpu()                   ? &detail::cpu_table()
                                 : d.type == DeviceType::sim  ? &detail::sim_table()
                                 : d.type == DeviceType::meta ? &detail::meta_table()
                                                              : detail::cuda_table();
  if (t == nullptr) return false;
#define ZT_KERNEL_SUPPORTED(name, sig) \
  if (kernel == #name) return t->name != nullptr;
  ZT_KERNELS(ZT_KERNEL_SUPPORTED)
#undef ZT_KERNEL_SUPPORTED
  ZT_THROW("[supports] unknown kernel '", kernel, "'");
}

}  // namespace zt::ops
