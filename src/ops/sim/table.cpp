// The sim device's kernel table (Note [sim device] in zt/core/sim_device.h): each of the CPU's
// kernels, queued on the sim stream over host views of the tensors' device memory, so the same
// arithmetic runs (a sim run follows the cpu run bit for bit) while the host never touches device
// memory. A kernel that returns a value to the host (sum_all, has_nonfinite, ...) waits for it, as
// a GPU's result is copied back. A kernel the CPU table lacks is missing here too.
#include <optional>
#include <tuple>
#include <type_traits>

#include "../kernel_table.h"
#include "zt/core/sim_device.h"

namespace zt::ops::detail {
namespace {

// What an argument becomes inside the queued work: a tensor its host view, a pointer to one an
// optional view, a DeviceUpdate's tensors views; anything else is copied.
Tensor hold(const Tensor& t) { return sim::host_alias(t); }
std::optional<Tensor> hold(const Tensor* t) {
  return t ? std::optional<Tensor>(sim::host_alias(*t)) : std::nullopt;
}
DeviceUpdate hold(const DeviceUpdate& u) {
  return {sim::host_alias(u.param),  sim::host_alias(u.master), sim::host_alias(u.grad),
          sim::host_alias(u.s0),     sim::host_alias(u.s1),     u.grad_scale,
          sim::host_alias(u.widened)};
}
template <typename T>
  requires(!std::is_pointer_v<T> && !std::is_same_v<T, Tensor> && !std::is_same_v<T, DeviceUpdate>)
T hold(const T& v) {
  return v;
}

// And back into the kernel's parameter.
template <typename T>
T& pass(T& held) {
  return held;
}
Tensor* pass(std::optional<Tensor>& held) { return held ? &*held : nullptr; }

template <auto Field, typename Fn>
struct SimKernel;

template <auto Field, typename R, typename... P>
struct SimKernel<Field, R (*)(P...)> {
  static R call(P... args) {
    auto work = [held = std::make_tuple(hold(args)...)]() mutable -> R {
      return std::apply([](auto&... h) -> R { return (cpu_table().*Field)(pass(h)...); }, held);
    };
    if constexpr (std::is_void_v<R>) {
      sim::enqueue(std::move(work));
    } else {
      R result{};
      sim::enqueue([&result, &work] { result = work(); });
      sim::synchronize();
      return result;
    }
  }
};

KernelTable make_sim_table() {
  const KernelTable& cpu = cpu_table();
  KernelTable t;
  t.backend = "sim";
#define ZT_SIM_ENTRY(name, sig) \
  t.name = cpu.name ? &SimKernel<&KernelTable::name, std::add_pointer_t<sig>>::call : nullptr;
  ZT_KERNELS(ZT_SIM_ENTRY)
#undef ZT_SIM_ENTRY
  return t;
}

}  // namespace

const KernelTable& sim_table() {
  static const KernelTable t = make_sim_table();
  return t;
}

}  // namespace zt::ops::detail
