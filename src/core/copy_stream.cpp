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

CopyEvent upload_on_copy_stream(Tensor& dst, const Tensor& src) {
  ZT_CHECK(src.device().is_cpu() && src.is_contiguous() && dst.is_contiguous() && src.dtype() == dst.dtype() &&
               src.numel() == dst.numel(),
           "[core] upload_on_copy_stream takes a contiguous host tensor and a contiguous tensor of the same dtype and "
           "size, got ",
           src.device(), " ", dtype_name(src.dtype()), " [", src.numel(), "] to ", dst.device(), " ",
           dtype_name(dst.dtype()), " [", dst.numel(), "]");
  const Device d = dst.device();
  if (d.is_cpu()) {
    dst.copy_(src);
    return {};
  }
  if (d.type == DeviceType::sim) return {d, detail::sim_upload_async(dst.raw_data(), src.raw_data(), src.nbytes())};
  return {d, detail::cuda_upload_async(dst.raw_data(), d.index, src.raw_data(), src.nbytes())};
}

}  // namespace zt
