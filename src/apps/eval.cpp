// `zerotrain eval`: test accuracy of saved weights (a single process needs no engine), in the
// configuration's working precision, so it reproduces what training printed.
#include <cstdio>

#include "commands.h"
#include "session.h"
#include "zt/ckpt/safetensors.h"
#include "zt/ops/ops.h"

namespace zt::apps {

int run_eval(const config::Config& cfg, const std::string& weights_path) {
  auto model = build_model(cfg);
  ckpt::LoadedTensors w = ckpt::load_safetensors(weights_path);
  for (auto& [name, p] : model->named_parameters()) {
    Tensor dst = p;
    dst.copy_(w.weight(name, p.shape()));  // present, that shape, a floating dtype
  }
  const DType dt = engine_options(cfg, config::BatchSizes{1, 1, 1}).dtype;
  if (dt != DType::f32) {
    for (auto& [name, p] : model->named_parameters()) {
      TagScope tag(MemTag::param);
      Tensor c = ops::cast(p, dt);
      p.rebind(c.storage(), c.offset(), dt);
    }
  }
  data::Dataset test = load_image_split(cfg, "test");
  const double acc =
      evaluate(test, 1000, [&](const Tensor& x) { return (*model)(dt == DType::f32 ? x : ops::cast(x, dt)); });
  std::printf("test accuracy: %.4f (%lld/%lld)\n", acc, (long long)std::llround(acc * test.size()),
              (long long)test.size());
  return 0;
}

}  // namespace zt::apps
