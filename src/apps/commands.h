#pragma once
#include "zt/comm/group.h"
#include "zt/config/config.h"

namespace zt::apps {

int run_train(const config::Config& cfg, comm::Group& group);
int run_eval(const config::Config& cfg, const std::string& weights);
int run_estimate(const config::Config& cfg, int world, double memory_gib);

}  // namespace zt::apps
