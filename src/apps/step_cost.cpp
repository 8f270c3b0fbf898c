#include "step_cost.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "models/model_kind.h"
#include "session.h"
#include "zt/core/allocator.h"
#include "zt/core/tensor.h"
#include "zt/ops/ops.h"

namespace zt::apps {

namespace {
std::string rate_text(double v) {  // a billion-parameter step takes minutes: 0.01/s must not print as 0
  char s[32];
  std::snprintf(s, sizeof s, v < 10 ? "%.3g" : "%.0f", v);
  return s;
}
}  // namespace

std::string StepCost::line(double samples_per_s, double step_ms) const {
  char s[96];
  std::snprintf(s, sizeof s, " | %.0f ms/step | MFU %.1f%%", step_ms, 100 * mfu(step_ms));
  return rate_text(tokens ? samples_per_s * double(rows_per_sample) : samples_per_s) +
         (tokens ? " tokens/s" : " samples/s") + s;
}

nlohmann::json StepCost::fields(double samples_per_s, double step_ms) const {
  nlohmann::json f = {{"step_ms", step_ms}, {"mfu", mfu(step_ms)}};
  if (tokens) f["tokens_per_s"] = samples_per_s * double(rows_per_sample);
  return f;
}

nlohmann::json StepCost::summary(double samples_per_s, double step_ms) const {
  nlohmann::json f = fields(samples_per_s, step_ms);
  f["flops_per_step"] = flops_per_step;
  f["product_rate_flops"] = rate;
  f["flops_formula"] = tokens ? "6 N + 12 n_layer n_embd T per token"
                     : extra  ? "6 N + 6 x each convolution's multiply-adds at its other positions per image"
                              : "6 N per sample";
  return f;
}

std::string StepCost::profile(double step_ms) const {
  char s[256];
  std::snprintf(s, sizeof s,
                "%.4g parameters; %.4g FLOPs per %s (%s), %.4g per step; %.4g TFLOP/s achieved of %.4g measured: MFU "
                "%.1f%%",
                params, flops_per_row, tokens ? "token" : "sample",
                tokens  ? "6 N + 12 n_layer n_embd T"
                : extra ? "6 N + convolutions' positions"
                        : "6 N",
                flops_per_step, flops_per_step / (step_ms / 1e3) / 1e12,
                rate / 1e12, 100 * mfu(step_ms));
  return s;
}

StepCost step_cost(const config::Config& c, Trainer& t, const config::BatchSizes& bs, comm::Group& g, double rate) {
  const ModelKind& kind = model_kind(c);
  StepCost s;
  s.rate = g.all_reduce_scalar(t.worker() >= 0 ? rate : 0.0, "product rates (Note [step cost])");
  s.rows_per_sample = kind.rows_per_sample(c);
  s.tokens = kind.shape(c).vocab_size > 0;
  for (const auto& [name, shape] : t.full_param_shapes()) s.params += double(shape_numel(shape));
  s.extra = kind.extra_flops_per_row != nullptr;
  s.flops_per_row = 6 * s.params + (s.extra ? double(kind.extra_flops_per_row(c)) : 0);
  s.flops_per_step = double(bs.train_batch_size) * double(s.rows_per_sample) * s.flops_per_row;
  return s;
}

double measure_rate(const config::Config& c) {
  const Device d = run_device(c.run.device);
  const DType dt = c.bf16 ? DType::bf16 : c.fp16.enabled ? DType::f16 : DType::f32;
  const double r = measure_product_rate(d, dt);
  for (Device each : {Device::cpu(), d}) {  // nothing of it stays cached or in a peak
    allocator_for(each).release_cached();
    allocator_for(each).reset_peaks();
  }
  return r;
}

double measure_product_rate(Device d, DType dt) {
  // Large enough to reach the kernels' rate, small enough to leave no mark on the host's peak.
  const int64_t n = d.type == DeviceType::cuda ? 4096 : 512;
  const Tensor a = ops::cast(Tensor::full({n, n}, 0.5f), dt).to(d), b = ops::cast(Tensor::full({n, n}, 0.25f), dt).to(d);
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {  // the first warms the kernels and caches
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor c = ops::matmul(a, b);
    (void)c.to(Device::cpu());  // a device's product has finished once its result is read back
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::max(best, 2.0 * double(n * n * n) / std::max(s, 1e-9));
  }
  return best;
}

double seconds_since_process_start() {
  std::ifstream stat("/proc/self/stat"), up("/proc/uptime");
  std::string line;
  double uptime = 0;
  if (!std::getline(stat, line) || !(up >> uptime)) return 0;
  // Field 22 (starttime, clock ticks after boot) follows the command's closing parenthesis.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  for (int i = 3; i < 22 && rest >> field; ++i) {
  }
  unsigned long long start = 0;
  if (!(rest >> start)) return 0;
  return std::max(0.0, uptime - double(start) / double(sysconf(_SC_CLK_TCK)));
}

}  // namespace zt::apps
