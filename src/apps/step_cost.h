#pragma once
// Note [step cost]: what a step costs, said plainly in the progress line, the metrics and
// summary.json. FLOPs of a step = rows trained x (6 N + the entry's extra_flops_per_row), N the
// parameters: 6 per parameter per row for the forward and backward products (Kaplan et al.; what
// llm.c and nanoGPT count), plus for a transformer's token 12 x layers x width x sequence length
// for QK^T and AV, for a CNN's image each convolution's multiply-adds at its other positions.
// MFU = those FLOPs per second / the product rate the ranks that compute measured before the
// model is built: each times a 512^3 product (4096^3 on a GPU) in the run's dtype on its own
// device and threads (a CPU's rated peak does not hold under its clocks and pinning), then hands
// the blocks back and resets the peaks, so no plan sees them.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "trainer.h"
#include "zt/comm/group.h"
#include "zt/config/config.h"
#include "zt/core/device.h"
#include "zt/core/dtype.h"

namespace zt::apps {

struct StepCost {
  double flops_per_step = 0;  // the whole global batch's
  double rate = 0;            // FLOP/s: the computing ranks' measured product rates, summed
  int64_t rows_per_sample = 1;
  bool tokens = false;  // a token model: its rows are tokens
  double mfu(double step_ms) const { return rate > 0 && step_ms > 0 ? flops_per_step / (step_ms / 1e3) / rate : 0; }
  // The progress line's part: "48,120 tokens/s | 312 ms/step | MFU 23.4%" (samples/s for images).
  std::string line(double samples_per_s, double step_ms) const;
  nlohmann::json fields(double samples_per_s, double step_ms) const;   // a metrics record's
  nlohmann::json summary(double samples_per_s, double step_ms) const;  // summary.json's, with the formula
  // flops_profiler's line: FLOPs per step and per row, the formula, the achieved rate and the MFU.
  std::string profile(double step_ms) const;
  double params = 0, flops_per_row = 0;
  bool extra = false;  // the entry counts FLOPs beyond 6 N (attention, convolutions)
};
// Every rank (one all-reduce): `rate` is this rank's measure_rate.
StepCost step_cost(const config::Config& c, Trainer& t, const config::BatchSizes& bs, comm::Group& g, double rate);
// This rank's product rate on run.device in the run's dtype, its blocks handed back and the peaks reset.
double measure_rate(const config::Config& c);

// FLOP/s of this rank's best of a few such products of `dt` on `d`.
double measure_product_rate(Device d, DType dt);
// Seconds since this process started (the kernel's start time against its uptime), so start-up
// counts the launch, MPI's set-up and the config too.
double seconds_since_process_start();

}  // namespace zt::apps
