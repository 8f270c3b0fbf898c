#include "zt/core/copy_stream.h"

#include "backend.h"
#include "zt/core/error.h"

namespace zt {

void CopyEvent::synchronize() const {
  if (handle_) detail::backend_of(device_.type).event_synchronize(device_.index, handle_);
}

void CopyEvent::make_compute_wait() const {
  if (handle_) detail::backend_of(device_.type).compute_waits(device_.index, handle_);
}

void use_device_on_this_thread(Device d) { detail::backend_of(d.type).set_current(d.index); }

CopyEvent copy_on_copy_stream(Tensor& dst, const Tensor& src) {
  const Device dd = dst.device(), sd = src.device();
  ZT_CHECK((dd.is_cpu() || sd.is_cpu()) && src.is_contiguous() && dst.is_contiguous() && src.dtype() == dst.dtype() &&
               src.numel() == dst.numel(),
           "[core] copy_on_copy_stream takes two contiguous tensors of the same dtype and size, one of them on the "
           "host, got ",
           sd, " ", dtype_name(src.dtype()), " [", src.numel(), "] to ", dd, " ", dtype_name(dst.dtype()), " [",
           dst.numel(), "]");
  const Device d = dd.is_cpu() ? sd : dd;
  const detail::DeviceBackend& b = detail::backend_of(d.type);
  if (b.copy_async == nullptr) {  // no copy stream there (the host, meta)
    dst.copy_(src);
    return {};
  }
  return {d, b.copy_async(dst.raw_data(), dd, src.raw_data(), sd, src.nbytes())};
}

}  // namespace zt
