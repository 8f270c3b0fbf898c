// `zerotrain eval`: test accuracy of saved weights (a single process needs no engine).
#include <cstdio>

#include "commands.h"
#include "session.h"
#include "zt/ckpt/safetensors.h"

namespace zt::apps {

int run_eval(const config::Config& cfg, const std::string& weights_path) {
  auto model = build_model(cfg);
  ckpt::LoadedTensors w = ckpt::load_safetensors(weights_path);
  for (auto& [name, p] : model->named_parameters()) {
    const Tensor* t = w.find(name);
    ZT_CHECK_AS(ErrorKind::checkpoint, t, "[eval] ", weights_path, " has no tensor '", name,
                "' (the config's model does not match)");
    ZT_CHECK_AS(ErrorKind::checkpoint, t->shape() == p.shape(), "[eval] ", weights_path, ": '", name, "' has shape ",
                shape_str(t->shape()), ", the model expects ", shape_str(p.shape()));
    Tensor dst = p;
    dst.copy_(*t);
  }
  data::Dataset test = data::load_mnist(cfg.data.dir, "test", 0.1307f, 0.3081f, cfg.data.test_limit);
  const double acc = evaluate(test, 1000, [&](const Tensor& x) { return (*model)(x); });
  std::printf("test accuracy: %.4f (%lld/%lld)\n", acc, (long long)std::llround(acc * test.size()),
              (long long)test.size());
  return 0;
}

}  // namespace zt::apps
