#pragma once
// Tensor: a cheap handle onto shared storage plus shape/strides (views share storage) and an
// opaque autograd slot that the autograd layer fills in. Strides and offsets are in elements.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "zt/core/allocator.h"
#include "zt/core/dtype.h"
#include "zt/core/error.h"

namespace zt {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

struct AutogradMeta;  // defined by the autograd layer

// Fields are written only by Tensor (rebind/release_storage keep the invariants checked).
struct TensorImpl {
  std::shared_ptr<Storage> storage;  // may be null for a released (ZeRO-3) parameter
  int64_t offset = 0;
  Shape shape, strides;
  DType dtype = DType::f32;
  Device device;  // kept while released, so a rebind can check it
  std::shared_ptr<AutogradMeta> autograd;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Factories (storage from allocator_for(device), tagged with current_tag() unless a tag is
  // given). Those that write values need host memory.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor empty(const Shape& shape, DType dtype, MemTag tag, Device device = Device::cpu());
  // Host memory from pinned_host_allocator(): page-locked where CUDA is built (fast, asynchronous
  // device copies), ordinary host memory with its own stats otherwise.
  static Tensor empty_pinned(const Shape& shape, DType dtype, MemTag tag);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, float value, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor from_vector(const std::vector<float>& v, const Shape& shape, DType dtype = DType::f32,
                            Device device = Device::cpu());
  static Tensor from_ints(const std::vector<int32_t>& v, const Shape& shape, Device device = Device::cpu());
  // A contiguous view of `shape` over an existing storage (e.g. a gradient inside a flat
  // buffer); the same bounds checks as rebind().
  static Tensor view_of(std::shared_ptr<Storage> storage, int64_t offset, const Shape& shape, DType dtype);
  // Shape and dtype without memory: a parameter whose values are materialised later (ZeRO-3
  // builds models partitioned), to be given storage by rebind().
  static Tensor unallocated(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  const Shape& strides() const { return impl_->strides; }
  int64_t dim() const { return int64_t(impl_->shape.size()); }
  int64_t size(int64_t d) const;
  int64_t numel() const { return shape_numel(impl_->shape); }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->device; }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype()); }
  int64_t offset() const { return impl_->offset; }
  bool is_contiguous() const;
  bool has_storage() const { return impl_->storage != nullptr; }
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }

  void* raw_data() const;  // start of this view's first element, unchecked (byte-level code)
  // Typed start; throws ErrorKind::invalid_argument unless T stores this tensor's dtype.
  template <typename T>
  T* data() const {
    if (dtype() != dtype_of<T>) throw_dtype_mismatch(dtype_of<T>);
    return static_cast<T*>(raw_data());
  }

  // Points this tensor (every handle sharing its impl) at `storage`, contiguous from element
  // `offset`, keeping shape and dtype: a parameter bound into a flat buffer (Note [rebind]).
  void rebind(std::shared_ptr<Storage> storage, int64_t offset);
  // The same, also changing the element type and taking the storage's device (the engine binds
  // models built on the host in f32 into its flat buffers, 16-bit or on a device).
  void rebind(std::shared_ptr<Storage> storage, int64_t offset, DType dtype);
  // Moves the data to `device` in place (every handle sharing its impl follows), contiguous:
  // torch's module.to(device) for a parameter. The old storage is freed when unshared.
  void move_to(Device device);
  // Drops the storage (a ZeRO-3 parameter between uses); shape, dtype and device stay.
  void release_storage();

  // Views (no copies) and copies.
  Tensor reshape(const Shape& shape) const;  // view if contiguous, else a contiguous copy
  Tensor view(const Shape& shape) const;     // requires contiguous
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops `dim`
  Tensor contiguous() const;                        // self if already contiguous
  Tensor clone() const;                             // contiguous copy, current tag
  Tensor clone(MemTag tag) const;
  Tensor to(DType dtype) const;    // converting copy (self if same dtype)
  Tensor to(Device device) const;  // contiguous copy on `device` (self if already there)

  // Note [device copies]: copy_, fill_, zero_ and to_vector work on any device. Contiguous
  // same-dtype copies and zeroing go straight through the device's copy and memset hooks;
  // anything else (a strided view, a dtype change, a non-zero fill) stages through host memory:
  // correct and slow, meant for set-up and tests, never a training step's hot path. A copy to
  // the host waits for the device; one from ordinary host memory is staged at the call and
  // returns without waiting (from pinned memory it waits: the copy engine reads it later).
  void copy_(const Tensor& src);  // same shape; converts dtype; handles strides
  void fill_(float value);
  void zero_();
  std::vector<float> to_vector() const;  // values in logical order, as float
  float item() const;                    // single-element tensor as float

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  [[noreturn]] void throw_dtype_mismatch(DType asked) const;

  std::shared_ptr<TensorImpl> impl_;
};

// Element-indexed visit of a possibly strided tensor's logical order (slow path helper).
void for_each_offset(const Shape& shape, const Shape& strides, int64_t base,
                     const std::function<void(int64_t logical, int64_t offset)>& fn);

}  // namespace zt
