#include "zt/core/tensor.h"

#include <cstring>

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
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

namespace {
std::shared_ptr<TensorImpl> make_impl(std::shared_ptr<Storage> st, int64_t off, Shape shape,
                                      Shape strides, DType dt) {
  auto impl = std::make_shared<TensorImpl>();
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
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return bf16_to_float(static_cast<const bf16*>(p)[i]);
    case DType::i32: return float(static_cast<const int32_t*>(p)[i]);
    case DType::i64: return float(static_cast<const int64_t*>(p)[i]);
    case DType::f16: return f16_to_float(static_cast<const f16*>(p)[i]);
  }
  ZT_THROW("[tensor] dtype ", dtype_name(dt), " is not supported here");
}

void store_float(void* p, DType dt, int64_t i, float v) {
  switch (dt) {
    case DType::f32: static_cast<float*>(p)[i] = v; return;
    case DType::bf16: static_cast<bf16*>(p)[i] = float_to_bf16(v); return;
    case DType::i32: static_cast<int32_t*>(p)[i] = int32_t(v); return;
    case DType::i64: static_cast<int64_t*>(p)[i] = int64_t(v); return;
    case DType::f16: static_cast<f16*>(p)[i] = float_to_f16(v); return;
  }
  ZT_THROW("[tensor] dtype ", dtype_name(dt), " is not supported here");
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

Tensor Tensor::empty(const Shape& shape, DType dtype) { return empty(shape, dtype, current_tag()); }

Tensor Tensor::empty(const Shape& shape, DType dtype, MemTag tag) {
  for (int64_t d : shape) ZT_CHECK(d >= 0, "[tensor] negative dimension in shape ", shape_str(shape));
  auto st = Allocator::global().allocate(size_t(shape_numel(shape)) * dtype_size(dtype), tag);
  return Tensor(make_impl(std::move(st), 0, shape, contiguous_strides(shape), dtype));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.zero_();
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& shape, DType dtype) {
  ZT_CHECK(int64_t(v.size()) == shape_numel(shape), "[tensor] ", v.size(),
           " values do not fill shape ", shape_str(shape));
  Tensor t = empty(shape, dtype);
  for (size_t i = 0; i < v.size(); ++i) store_float(t.raw_data(), dtype, int64_t(i), v[i]);
  return t;
}

Tensor Tensor::from_ints(const std::vector<int32_t>& v, const Shape& shape) {
  ZT_CHECK(int64_t(v.size()) == shape_numel(shape), "[tensor] ", v.size(),
           " values do not fill shape ", shape_str(shape));
  Tensor t = empty(shape, DType::i32);
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * 4);
  return t;
}

Tensor Tensor::view_of(std::shared_ptr<Storage> storage, int64_t offset, const Shape& shape, DType dtype) {
  ZT_ASSERT(!storage || size_t(offset + shape_numel(shape)) * dtype_size(dtype) <= storage->bytes(),
            "view exceeds its storage");
  return Tensor(make_impl(std::move(storage), offset, shape, contiguous_strides(shape), dtype));
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
    ZT_CHECK(known > 0 && numel() % known == 0, "[view] cannot view ", shape_str(this->shape()),
             " as ", shape_str(shape));
    s[size_t(infer)] = numel() / known;
  }
  ZT_CHECK(shape_numel(s) == numel(), "[view] cannot view ", shape_str(this->shape()), " (", numel(),
           " elements) as ", shape_str(shape));
  ZT_CHECK(is_contiguous(), "[view] tensor of shape ", shape_str(this->shape()),
           " is not contiguous; use reshape");
  return Tensor(make_impl(impl_->storage, impl_->offset, s, contiguous_strides(s), impl_->dtype));
}

Tensor Tensor::reshape(const Shape& shape) const { return is_contiguous() ? view(shape) : contiguous().view(shape); }

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = norm_dim(d0, dim(), "transpose");
  d1 = norm_dim(d1, dim(), "transpose");
  Shape sh = impl_->shape, st = impl_->strides;
  std::swap(sh[size_t(d0)], sh[size_t(d1)]);
  std::swap(st[size_t(d0)], st[size_t(d1)]);
  return Tensor(make_impl(impl_->storage, impl_->offset, sh, st, impl_->dtype));
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
  return Tensor(make_impl(impl_->storage, impl_->offset + start * impl_->strides[size_t(d)], sh,
                          impl_->strides, impl_->dtype));
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = norm_dim(d, dim(), "select");
  if (index < 0) index += impl_->shape[size_t(d)];
  Tensor s = slice(d, index, index + 1);
  Shape sh = s.shape(), st = s.strides();
  sh.erase(sh.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(make_impl(s.impl_->storage, s.impl_->offset, sh, st, s.impl_->dtype));
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const { return clone(current_tag()); }

Tensor Tensor::clone(MemTag tag) const {
  Tensor out = empty(shape(), dtype(), tag);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  Tensor out = empty(shape(), dt);
  out.copy_(*this);
  return out;
}

void Tensor::copy_(const Tensor& src) {
  ZT_CHECK(src.shape() == shape(), "[copy] shape ", shape_str(src.shape()), " does not match ",
           shape_str(shape()));
  if (numel() == 0) return;
  if (src.dtype() == dtype() && is_contiguous() && src.is_contiguous()) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
    return;
  }
  void* dst_base = impl_->storage->data();
  const void* src_base = src.impl_->storage->data();
  std::vector<int64_t> dst_off(static_cast<size_t>(numel()));
  for_each_offset(shape(), strides(), offset(), [&](int64_t i, int64_t off) { dst_off[size_t(i)] = off; });
  for_each_offset(src.shape(), src.strides(), src.offset(), [&](int64_t i, int64_t off) {
    store_float(dst_base, dtype(), dst_off[size_t(i)], load_as_float(src_base, src.dtype(), off));
  });
}

void Tensor::fill_(float value) {
  void* base = impl_->storage ? impl_->storage->data() : nullptr;
  ZT_CHECK(base || numel() == 0, "[fill] tensor has no storage");
  if (is_contiguous() && dtype() == DType::f32) {
    float* p = data<float>();
    for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = value;
    return;
  }
  for_each_offset(shape(), strides(), offset(), [&](int64_t, int64_t off) { store_float(base, dtype(), off, value); });
}

void Tensor::zero_() {
  if (is_contiguous()) {
    if (numel()) std::memset(raw_data(), 0, nbytes());
  } else {
    fill_(0.f);
  }
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  if (out.empty()) return out;
  const void* base = impl_->storage->data();
  ZT_CHECK(base, "[tensor] tensor has no storage");
  for_each_offset(shape(), strides(), offset(),
                  [&](int64_t i, int64_t off) { out[size_t(i)] = load_as_float(base, dtype(), off); });
  return out;
}

float Tensor::item() const {
  ZT_CHECK(numel() == 1, "[item] tensor of shape ", shape_str(shape()), " has ", numel(), " elements, not 1");
  return to_vector()[0];
}

}  // namespace zt
