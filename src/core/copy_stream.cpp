#include "zt/core/copy_stream.h"

#include "backend.h"
#include "zt/core/error.h"

namespace zt {

void CopyEvent::synchronize() const {
  if (!handle_) return;
  if (device_.type == DeviceType::sim)
    detail::sim_event_synchronize(handle_);
  else
    detail::cuda_event_synchronize(device_.index, handle_);
}

void CopyEvent::make_compute_wait() const {
  if (!handle_) return;
  if (device_.type == DeviceType::sim)
    detail::sim_compute_waits(handle_);
  else
    detail::cuda_compute_waits(device_.index, handle_);
}

void use_device_on_this_thread(Device d) {
  if (d.type == DeviceType::cuda) detail::cuda_set_current(d.index);
}

CopyEvent copy_on_copy_stream(Tensor& dst, const Tensor& src) {
  const Device dd = dst.device(), sd = src.device();
  ZT_CHECK((dd.is_cpu() || sd.is_cpu()) && src.is_contiguous() && dst.is_contiguous() && src.dtype() == dst.dtype() &&
               src.numel() == dst.numel(),
           "[core] copy_on_copy_stream takes two contiguous tensors of the same dtype and size, one of them on the "
           "host, got ",
           sd, " ", dtype_name(src.dtype()), " [", src.numel(), "] to ", dd, " ", dtype_name(dst.dtype()), " [",
           dst.numel(), "]");
  const Device d = dd.is_cpu() ? sd : dd;
  if (d.is_cpu() || d.type == DeviceType::meta) {
    dst.copy_(src);
    return {};
  }
  if (d.type == DeviceType::sim)
    return {d, detail::sim_copy_async(dst.raw_data(), dd, src.raw_data(), sd, src.nbytes())};
  return {d, detail::cuda_copy_async(dst.raw_data(), src.raw_data(), src.nbytes(), d.index)};
}

}  // namespace zt
