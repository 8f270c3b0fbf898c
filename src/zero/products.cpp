// The product path of a 16-bit run, agreed over the group (Note [16-bit products], ops.h).
#include "zt/zero/products.h"

#include <cstdio>

#include "zt/core/allocator.h"
#include "zt/core/error.h"

namespace zt::zero {
namespace {

std::string shape_name(const ProductShape& s) { return detail::concat(s.rows, "x", s.in, "x", s.out); }

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  return buf;
}

}  // namespace

std::string ProductsChoice::line(DType dt, bool f32_compute) const {
  return detail::concat(dtype_name(dt), " products: ", ops::products_name(products), " kernels (", reason, ")",
                        f32_compute ? detail::concat("; computing in f32 over weights widened once per step, ",
                                                     dtype_name(dt), " on the wire and in the states")
                                    : "");
}

ProductsChoice decide_products(DType dt, const ProductFacts& f, ProductShape shape) {
  ProductsChoice c;
  c.setting = "auto";
  c.shape = shape;
  c.amx = f.amx;
  const std::string amx = f.amx ? "AMX" : "no AMX";
  if (!f.kernel) {
    c.products = ops::Products::f32;
    c.reason = detail::concat("oneDNN has no ", dtype_name(dt), " kernel here; ", amx);
  } else if (f.amx || !f.times) {
    c.products = ops::Products::native;
    c.reason = amx;
  } else {
    const ops::ProductTimes& t = *f.times;
    const bool f32 = t.f32_s < kF32Margin * t.native_s;
    c.products = f32 ? ops::Products::f32 : ops::Products::native;
    c.native_ms = t.native_s * 1e3;
    c.f32_ms = t.f32_s * 1e3;
    c.reason = detail::concat("measured ", ms(f32 ? t.f32_s : t.native_s), " vs ", f32 ? "native " : "f32 ",
                              ms(f32 ? t.native_s : t.f32_s), " on ", shape_name(shape), "; ", amx,
                              !f32 && t.f32_s < t.native_s ? "; f32 is not 10% faster" : "");
  }
  return c;
}

ProductsChoice choose_products(comm::Group& group, DType dt, const std::string& setting, ProductShape shape) {
  ZT_CHECK_AS(ErrorKind::config, setting == "auto" || setting == "native" || setting == "f32",
              "[config] 'run.bf16_products' must be one of auto, native, f32, got \"", setting, "\"");
  ProductsChoice c;
  c.setting = setting;
  c.shape = shape;
  c.amx = ops::cpu_has_amx();
  const std::string amx = c.amx ? "AMX" : "no AMX";
  if (setting != "auto") {
    // Native without a kernel is the f32 path anyway (Note [low-precision fallback]); said as such.
    const bool kernel = ops::matmul_native(dt);
    c.products = setting == "f32" || !kernel ? ops::Products::f32 : ops::Products::native;
    c.reason = "run.bf16_products = " + setting +
               (kernel ? "" : detail::concat(", but oneDNN has no ", dtype_name(dt), " kernel here")) + "; " + amx;
  } else {
    bool f32 = false;
    if (group.rank() == 0) {
      ProductFacts f{c.amx, ops::matmul_native(dt), std::nullopt};
      if (f.kernel && !f.amx) {
        f.times = ops::time_lowp_products(dt, shape.rows, shape.in, shape.out, 3);
        Allocator::global().release_cached();  // the timing's blocks are not the run's (Note [peak memory])
      }
      c = decide_products(dt, f, shape);
      f32 = c.products == ops::Products::f32;
    }
    // Rank 0's choice for every rank: a processor may differ between hosts, the path must not.
    c.products = group.all_reduce_scalar(f32 ? 1.0 : 0.0, "16-bit products, rank 0's choice") > 0.5
                     ? ops::Products::f32
                     : ops::Products::native;
    if (group.rank() != 0) c.reason = "rank 0's choice";
  }
  ops::set_lowp_products(c.products);
  return c;
}

}  // namespace zt::zero
