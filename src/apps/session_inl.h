#pragma once
#include <numeric>

#include "zt/autograd/autograd.h"
#include "zt/ops/ops.h"

namespace zt::apps {

template <typename Forward>
double evaluate(const data::Dataset& ds, int64_t batch, Forward&& forward) {
  autograd::NoGradGuard no_grad;
  std::vector<int64_t> order(static_cast<size_t>(ds.size()));
  std::iota(order.begin(), order.end(), 0);
  int64_t correct = 0;
  for (int64_t b = 0; b < ds.size(); b += batch) {
    const int64_t e = std::min(ds.size(), b + batch);
    data::Batch bt = data::gather_batch(ds, order, b, e);
    correct += ops::count_correct(forward(bt.x), bt.y);
  }
  return ds.size() ? double(correct) / double(ds.size()) : 0.0;
}

}  // namespace zt::apps
