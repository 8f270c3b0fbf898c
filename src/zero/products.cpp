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

std::string ProductsChoice::line(DType dt) const {
  return detail::concat(dtype_name(dt), " products: ", ops::products_name(products), " kernels (", reason, ")");
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
      if (!ops::matmul_native(dt)) {
        f32 = true;
        c.reason = detail::concat("oneDNN has no ", dtype_name(dt), " kernel here; ", amx);
      } else if (c.amx) {
        c.reason = "AMX";
      } else {
        const ops::ProductTimes t = ops::time_lowp_products(dt, shape.rows, shape.in, shape.out, 3);
        Allocator::global().release_cached();  // the timing's blocks are not the run's (Note [peak memory])
        f32 = t.f32_s < t.native_s;
        c.native_ms = t.native_s * 1e3;
        c.f32_ms = t.f32_s * 1e3;
        c.reason = detail::concat("measured ", ms(f32 ? t.f32_s : t.native_s), " vs ", f32 ? "native " : "f32 ",
                                  ms(f32 ? t.native_s : t.f32_s), " on ", shape_name(shape), "; no AMX");
      }
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
