#include "zt/core/tensor.h"

#include <cstring>

#include "backend.h"

namespace zt {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  out += ']';
  return out;
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s)
    ZT_CHECK_AS(ErrorKind::invalid_argument, !__builtin_mul_overflow(n, d, &n), "[tensor] shape ", shape_str(s),
                " has more elements than int64 can count");
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    if (i > 0)  // the outermost dimension's extent never enters a stride
      ZT_CHECK_AS(ErrorKind::invalid_argument, !__builtin_mul_overflow(acc, s[i], &acc), "[tensor] shape ",
                  shape_str(s), " has more elements than int64 can count");
  }
  return st;
}

namespace {
std::shared_ptr<TensorImpl> make_impl(std::shared_ptr<Storage> st, int64_t off, Shape shape, Shape strides, DType dt,
                                      Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->device = device;
  impl->storage = std::move(st);
  impl->offset = off;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = dt;
  return impl;
}

int64_t norm_dim(int64_t d, int64_t ndim, const char* op) {
  if (d < 0) d += ndim;
  ZT_CHECK(d >= 0 && d < ndim, "[", op, "] dimension ", d, " out of range for a ", ndim, "-d tensor");
  return d;
}

float load_as_float(const void* p, DType dt, int64_t i) {
  switch (dt) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::bf16:
      return bf16_to_float(static_cast<const bf16*>(p)[i]);
    case DType::i32:
      return float(static_cast<const int32_t*>(p)[i]);
    case DType::i64:
      return float(static_cast<const int64_t*>(p)[i]);
    case DType::f16:
      return f16_to_float(static_cast<const f16*>(p)[i]);
  }
  ZT_THROW("[tensor] dtype ", dtype_name(dt), " is not supported here");
}

void store_float(void* p, DType dt, int64_t i, float v) {
  switch (dt) {
    case DType::f32:
      static_cast<float*>(p)[i] = v;
      return;
    case DType::bf16:
      static_cast<bf16*>(p)[i] = float_to_bf16(v);
      return;
    case DType::i32:
      static_cast<int32_t*>(p)[i] = int32_t(v);
      return;
    case DType::i64:
      static_cast<int64_t*>(p)[i] = int64_t(v);
      return;
    case DType::f16:
      static_cast<f16*>(p)[i] = float_to_f16(v);
      return;
  }
  ZT_THROW("[tensor] dtype ", dtype_name(dt), " is not supported here");
}

// Element range [offset, offset + numel) must lie in the storage's bytes at `dt`.
void check_fits(const Storage& st, int64_t offset, int64_t numel, DType dt, const char* op) {
  const int64_t cap = int64_t(st.bytes() / dtype_size(dt));
  ZT_CHECK(offset >= 0, "[", op, "] negative offset ", offset);
  ZT_CHECK(offset <= cap && numel <= cap - offset, "[", op, "] elements [", offset, ", ", offset + numel, ") of ",
           dtype_name(dt), " do not fit in a storage of ", st.bytes(), " bytes (", cap, " elements)");
}
}  // namespace

void for_each_offset(const Shape& shape, const Shape& strides, int64_t base,
                     const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = shape_numel(shape);
  if (n == 0) return;
  const size_t nd = shape.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = base;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, off);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return empty(shape, dtype, current_tag(), device);
}

namespace {
Tensor empty_from(Allocator& a, const Shape& shape, DType dtype, MemTag tag) {
  for (int64_t d : shape) ZT_CHECK(d >= 0, "[tensor] negative dimension in shape ", shape_str(shape));
  size_t bytes = 0;
  ZT_CHECK_AS(ErrorKind::out_of_memory, !__builtin_mul_overflow(size_t(shape_numel(shape)), dtype_size(dtype), &bytes),
              "[tensor] a ", dtype_name(dtype), " tensor of shape ", shape_str(shape),
              " would need more bytes than size_t can count");
  auto st = a.allocate(bytes, tag);
  return Tensor::view_of(std::move(st), 0, shape, dtype);
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, MemTag tag, Device device) {
  return empty_from(allocator_for(device), shape, dtype, tag);
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype, MemTag tag) {
  return empty_from(pinned_host_allocator(), shape, dtype, tag);
}

Tensor Tensor::unallocated(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) ZT_CHECK(d >= 0, "[tensor] negative dimension in shape ", shape_str(shape));
  return Tensor(make_impl(nullptr, 0, shape, contiguous_strides(shape), dtype, device));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& shape, DType dtype, Device device) {
  ZT_CHECK(int64_t(v.size()) == shape_numel(shape), "[tensor] ", v.size(), " values do not fill shape ",
           shape_str(shape));
  Tensor t = empty(shape, dtype, Device::cpu());
  for (size_t i = 0; i < v.size(); ++i) store_float(t.raw_data(), dtype, int64_t(i), v[i]);
  return t.to(device);
}

Tensor Tensor::from_ints(const std::vector<int32_t>& v, const Shape& shape, Device device) {
  ZT_CHECK(int64_t(v.size()) == shape_numel(shape), "[tensor] ", v.size(), " values do not fill shape ",
           shape_str(shape));
  Tensor t = empty(shape, DType::i32, Device::cpu());
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * 4);
  return t.to(device);
}

Tensor Tensor::view_of(std::shared_ptr<Storage> storage, int64_t offset, const Shape& shape, DType dtype) {
  ZT_CHECK(storage, "[view_of] storage is null");
  check_fits(*storage, offset, shape_numel(shape), dtype, "view_of");
  const Device device = storage->device();
  return Tensor(make_impl(std::move(storage), offset, shape, contiguous_strides(shape), dtype, device));
}

// Note [rebind]: ZeRO packs parameters into flat buffers and, at stage 3, releases and re-gathers
// them every step. The module's handle must keep working, so the shared impl itself is repointed;
// views taken earlier keep the old storage alive and see none of it.
void Tensor::rebind(std::shared_ptr<Storage> storage, int64_t offset) {
  ZT_CHECK(defined(), "[rebind] tensor is undefined");
  ZT_CHECK(storage, "[rebind] storage is null (use release_storage() to detach)");
  ZT_CHECK(storage->device() == device(), "[rebind] storage is on ", storage->device(), " but the tensor is on ",
           device());
  check_fits(*storage, offset, numel(), dtype(), "rebind");
  impl_->storage = std::move(storage);
  impl_->offset = offset;
  impl_->strides = contiguous_strides(impl_->shape);
}

void Tensor::rebind(std::shared_ptr<Storage> storage, int64_t offset, DType dtype) {
  ZT_CHECK(defined(), "[rebind] tensor is undefined");
  ZT_CHECK(storage, "[rebind] storage is null (use release_storage() to detach)");
  check_fits(*storage, offset, numel(), dtype, "rebind");  // before anything changes
  const DType old = impl_->dtype;
  const Device old_device = impl_->device;
  impl_->dtype = dtype;
  impl_->device = storage->device();
  try {
    rebind(std::move(storage), offset);
  } catch (...) {
    impl_->dtype = old;
    impl_->device = old_device;
    throw;
  }
}

void Tensor::move_to(Device d) {
  ZT_CHECK(defined(), "[move_to] tensor is undefined");
  if (d == device()) return;
  const Tensor moved = to(d);
  impl_->storage = moved.impl_->storage;
  impl_->offset = moved.impl_->offset;
  impl_->strides = moved.impl_->strides;
  impl_->device = d;
}

void Tensor::release_storage() {
  ZT_CHECK(defined(), "[release_storage] tensor is undefined");
  impl_->storage.reset();
  impl_->offset = 0;
}

void Tensor::throw_dtype_mismatch(DType asked) const {
  ZT_THROW("[tensor] data<", dtype_name(asked), ">() on a tensor of dtype ", dtype_name(dtype()),
           " (use the element type of its dtype, or raw_data() for bytes)");
}

int64_t Tensor::size(int64_t d) const { return impl_->shape[size_t(norm_dim(d, dim(), "size"))]; }

bool Tensor::is_contiguous() const {
  int64_t acc = 1;
  for (size_t i = impl_->shape.size(); i-- > 0;) {
    if (impl_->shape[i] != 1 && impl_->strides[i] != acc) return false;
    acc *= impl_->shape[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  ZT_CHECK(impl_ && impl_->storage, "[tensor] tensor has no storage (released or undefined)");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * int64_t(dtype_size(impl_->dtype));
}

Tensor Tensor::view(const Shape& shape) const {
  Shape s = shape;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      ZT_CHECK(infer < 0, "[view] only one dimension may be -1 in ", shape_str(shape));
      infer = int64_t(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    ZT_CHECK(known > 0 && numel() % known == 0, "[view] cannot view ", shape_str(this->shape()), " as ",
             shape_str(shape));
    s[size_t(infer)] = numel() / known;
  }
  ZT_CHECK(shape_numel(s) == numel(), "[view] cannot view ", shape_str(this->shape()), " (", numel(), " elements) as ",
           shape_str(shape));
  ZT_CHECK(is_contiguous(), "[view] tensor of shape ", shape_str(this->shape()), " is not contiguous; use reshape");
  return Tensor(make_impl(impl_->storage, impl_->offset, s, contiguous_strides(s), impl_->dtype, impl_->device));
}

Tensor Tensor::reshape(const Shape& shape) const { return is_contiguous() ? view(shape) : contiguous().view(shape); }

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = norm_dim(d0, dim(), "transpose");
  d1 = norm_dim(d1, dim(), "transpose");
  Shape sh = impl_->shape, st = impl_->strides;
  std::swap(sh[size_t(d0)], sh[size_t(d1)]);
  std::swap(st[size_t(d0)], st[size_t(d1)]);
  return Tensor(make_impl(impl_->storage, impl_->offset, sh, st, impl_->dtype, impl_->device));
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end) const {
  d = norm_dim(d, dim(), "slice");
  const int64_t n = impl_->shape[size_t(d)];
  if (start < 0) start += n;
  if (end < 0) end += n;
  ZT_CHECK(0 <= start && start <= end && end <= n, "[slice] range [", start, ", ", end,
           ") out of bounds for dimension ", d, " of size ", n);
  Shape sh = impl_->shape;
  sh[size_t(d)] = end - start;
  return Tensor(make_impl(impl_->storage, impl_->offset + start * impl_->strides[size_t(d)], sh, impl_->strides,
                          impl_->dtype, impl_->device));
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = norm_dim(d, dim(), "select");
  if (index < 0) index += impl_->shape[size_t(d)];
  Tensor s = slice(d, index, index + 1);
  Shape sh = s.shape(), st = s.strides();
  sh.erase(sh.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(make_impl(s.impl_->storage, s.impl_->offset, sh, st, s.impl_->dtype, s.impl_->device));
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const { return clone(current_tag()); }

Tensor Tensor::clone(MemTag tag) const {
  Tensor out = empty(shape(), dtype(), tag, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  Tensor out = empty(shape(), dt, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  Tensor out = empty(shape(), dtype(), d);
  out.copy_(*this);
  return out;
}

namespace {

// The elements [lo, hi) of its storage that a (non-empty) view touches: a staged copy moves only
// these, so it neither crosses the bus with a whole flat buffer nor writes back the rest of it
// (which another stream may be filling meanwhile).
struct Span {
  int64_t lo, hi;
};
Span span_of(const Tensor& t) {
  Span s{t.offset(), t.offset() + 1};
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.strides()[size_t(d)];
    (reach < 0 ? s.lo : s.hi) += reach;
  }
  return s;
}

// A host tensor with t's values: t itself on the host, else a copy of the span t touches with t's
// view over it (Note [device copies]).
Tensor on_host(const Tensor& t) {
  if (t.device().is_cpu()) return t;
  const Span s = span_of(t);
  const size_t es = dtype_size(t.dtype());
  auto host = Allocator::global().allocate(size_t(s.hi - s.lo) * es, t.storage()->tag());
  detail::device_copy(host->data(), Device::cpu(), static_cast<const char*>(t.storage()->data()) + s.lo * es, t.device(),
                    host->bytes());
  return Tensor(make_impl(host, t.offset() - s.lo, t.shape(), t.strides(), t.dtype(), Device::cpu()));
}

// Both on the host: converts dtypes and follows strides.
void host_copy(const Tensor& dst, const Tensor& src) {
  if (src.dtype() == dst.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    std::memmove(dst.raw_data(), src.raw_data(), dst.nbytes());
    return;
  }
  void* dst_base = dst.storage()->data();
  const void* src_base = src.storage()->data();
  std::vector<int64_t> dst_off(static_cast<size_t>(dst.numel()));
  for_each_offset(dst.shape(), dst.strides(), dst.offset(), [&](int64_t i, int64_t off) { dst_off[size_t(i)] = off; });
  for_each_offset(src.shape(), src.strides(), src.offset(), [&](int64_t i, int64_t off) {
    store_float(dst_base, dst.dtype(), dst_off[size_t(i)], load_as_float(src_base, src.dtype(), off));
  });
}

}  // namespace

void Tensor::copy_(const Tensor& src) {
  ZT_CHECK(src.shape() == shape(), "[copy] shape ", shape_str(src.shape()), " does not match ", shape_str(shape()));
  if (numel() == 0) return;
  ZT_CHECK(has_storage() && src.has_storage(), "[copy] tensor has no storage (released)");
  const bool host = device().is_cpu() && src.device().is_cpu();
  if (host || (src.dtype() == dtype() && is_contiguous() && src.is_contiguous())) {
    if (host)
      host_copy(*this, src);
    else
      detail::device_copy(raw_data(), device(), src.raw_data(), src.device(), nbytes());
    return;
  }
  // Staged (Note [device copies]): convert on the host, then one contiguous upload.
  const Tensor src_host = on_host(src);
  if (device().is_cpu()) return host_copy(*this, src_host);
  Tensor dst_host = on_host(*this);
  host_copy(dst_host, src_host);
  const int64_t lo = span_of(*this).lo;
  detail::device_copy(static_cast<char*>(storage()->data()) + lo * int64_t(dtype_size(dtype())), device(),
                    dst_host.storage()->data(), Device::cpu(), dst_host.storage()->bytes());
}

void Tensor::fill_(float value) {
  void* base = impl_->storage ? impl_->storage->data() : nullptr;
  ZT_CHECK(base || numel() == 0, "[fill] tensor has no storage");
  if (!device().is_cpu()) {
    if (value == 0.f && is_contiguous()) return zero_();
    return copy_(full(shape(), value, dtype(), Device::cpu()));
  }
  if (is_contiguous() && dtype() == DType::f32) {
    float* p = data<float>();
    for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = value;
    return;
  }
  for_each_offset(shape(), strides(), offset(), [&](int64_t, int64_t off) { store_float(base, dtype(), off, value); });
}

void Tensor::zero_() {
  if (!is_contiguous()) return fill_(0.f);
  if (numel() == 0) return;
  if (device().is_cpu())
    std::memset(raw_data(), 0, nbytes());
  else
    detail::device_memset(raw_data(), device(), 0, nbytes());
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  if (out.empty()) return out;
  ZT_CHECK(has_storage(), "[to_vector] tensor has no storage (released)");
  const Tensor h = on_host(*this);  // a device view's copy starts at its span: h's offset, not this one's
  const void* base = h.storage()->data();
  for_each_offset(shape(), strides(), h.offset(),
                  [&](int64_t i, int64_t off) { out[size_t(i)] = load_as_float(base, dtype(), off); });
  return out;
}

float Tensor::item() const {
  ZT_CHECK(numel() == 1, "[item] tensor of shape ", shape_str(shape()), " has ", numel(), " elements, not 1");
  return to_vector()[0];
}

}  // namespace zt
