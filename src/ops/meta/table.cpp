// The meta device's kernel table (Note [meta device] in core/meta.cpp): every kernel the CPU has,
// doing nothing. Outputs were allocated by the contracts, which is all a dry run measures; a
// kernel that returns a value to the host returns zero (an empty list, false).
#include <type_traits>

#include "../kernel_table.h"

namespace zt::ops::detail {
namespace {

template <typename Fn>
struct MetaKernel;

template <typename R, typename... P>
struct MetaKernel<R (*)(P...)> {
  static R call(P...) {
    if constexpr (!std::is_void_v<R>) return R{};
  }
};

KernelTable make_meta_table() {
  const KernelTable& cpu = cpu_table();
  KernelTable t;
  t.backend = "meta";
#define ZT_META_ENTRY(name, sig) t.name = cpu.name ? &MetaKernel<std::add_pointer_t<sig>>::call : nullptr;
  ZT_KERNELS(ZT_META_ENTRY)
#undef ZT_META_ENTRY
  return t;
}

}  // namespace

const KernelTable& meta_table() {
  static const KernelTable t = make_meta_table();
  return t;
}

}  // namespace zt::ops::detail
