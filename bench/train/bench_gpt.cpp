// GPT-2-style training throughput through zero::Engine + AdamW on deterministic random tokens:
// the model is nn::make_gpt at the shape the flags give (--family llama: nn::make_llama with
// --kv-heads, --ffn and --tie); bench/torch_gpt.py is its PyTorch peer
// (same shape, same tokens, same JSON fields). Under `mpirun -np N` every requested (stage, dtype)
// runs in turn in the same processes; rank 0 prints one JSON line each. --batch is the
// micro-batch per rank, so the global batch is batch x N. step_s is the median of rank 0's step
// times; tokens_per_s is global tokens x timed steps / total seconds (the slowest rank's). Peak
// memory per rank: the allocator's peak (max over ranks) and the OS's peak RSS of the process so
// far (run one configuration per process for a per-configuration RSS).
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "train_bench.h"
#include "zt/autograd/functions.h"
#include "zt/comm/group.h"
#include "zt/core/error.h"
#include "zt/core/parallel.h"
#include "zt/nn/llama.h"
#include "zt/nn/transformer.h"
#include "zt/optim/optimizer.h"
#include "zt/autograd/autograd.h"
#include "zt/core/allocator.h"
#include "zt/zero/engine.h"
#include "zt/zero/products.h"
#include "zt/core/splitmix.h"

using namespace zt;

namespace {

struct Args {
  std::string name = "gpt";  // label of the shape in the JSON lines
  std::string family = "gpt";  // gpt | llama
  nn::TransformerConfig model;  // the shape (llama: and the keys below)
  int64_t kv_heads = 0, ffn = 0;  // llama: 0 = --heads, 8/3 --embd rounded up to 64
  bool tie = true;
  int64_t batch = 8, steps = 10, warmup = 2;
  std::vector<int> stages;  // empty: 0 for one process, 0,1,2,3 for several
  std::vector<DType> dtypes = {DType::f32};
  int threads = 0;  // 0: cores shared by the ranks on this node
  uint64_t seed = 1234;
  std::string backend = "auto";
  int64_t bucket = 2'000'000;  // elements per gradient bucket: several per model, so reduction overlaps backward
  // Gradient elements whose reduction may be in flight (0: 4 buckets, so that the buckets of one
  // large layer, ready together, reduce while backward goes on; the engine's default is 1 bucket).
  int64_t inflight = 0;
  bool sparse = false;  // sparse_gradients: wpe as rows, the tied wte in two parts (Note [tied rows])
  // 16-bit runs: each product path in turn (Note [16-bit products]); f32 runs once. f32-per-product:
  // the f32 path with the model kept in 16 bits, each product widening its operands (before Note [f32 compute]).
  std::vector<std::string> products = {"auto"};
  std::string device = "cpu";  // cuda: the model on GPU 0 without the engine (run_on_device)
};

void usage() {
  std::fprintf(stderr,
               "usage: bench_gpt [--name LABEL] [--layers 4] [--embd 192] [--heads 6] [--vocab 16384] [--ctx 256] "
               "[--batch 8 (per rank)] [--dtype f32,bf16] [--stages 0,1,2,3] [--steps 10] [--warmup 2] [--threads T] "
               "[--checkpointing 0|1] [--seed S] [--backend auto|local|mpi|...] [--bucket ELEMS] [--inflight ELEMS] "
               "[--sparse 0|1] [--products auto,native,f32,f32-per-product] [--device cpu|cuda] [--family gpt|llama] "
               "[--kv-heads K] [--ffn I] [--tie 0|1]\n");
}

// The model of the flags: GPT-2's, or a Llama of the same shape (RMSNorm eps 1e-5, as the peer's).
std::shared_ptr<nn::Module> make_model(const Args& a) {
  if (a.family == "gpt") return nn::make_gpt(a.model);
  nn::LlamaConfig l;
  l.vocab_size = a.model.vocab_size;
  l.block_size = a.model.block_size;
  l.n_layer = a.model.n_layer;
  l.n_head = a.model.n_head;
  l.n_kv_head = a.kv_heads > 0 ? a.kv_heads : a.model.n_head;
  l.n_embd = a.model.n_embd;
  l.intermediate_size = a.ffn > 0 ? a.ffn : (8 * a.model.n_embd / 3 + 63) / 64 * 64;
  l.rms_norm_eps = 1e-5f;
  l.tie_word_embeddings = a.tie;
  l.activation_checkpointing = a.model.activation_checkpointing;
  l.seed = a.seed;
  return nn::make_llama(l);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  ZT_CHECK(!out.empty(), "[bench_gpt] empty list '", s, "'");
  return out;
}

int64_t positive(const std::string& k, const std::string& v) {
  const int64_t n = std::atoll(v.c_str());
  ZT_CHECK(n > 0, "[bench_gpt] ", k, " must be a positive integer, got '", v, "'");
  return n;
}

Args parse(int argc, char** argv) {
  Args a;
  a.model.n_layer = 4, a.model.n_embd = 192, a.model.n_head = 6, a.model.vocab_size = 16384, a.model.block_size = 256;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      usage();
      std::exit(0);
    }
    ZT_CHECK(i + 1 < argc, "[bench_gpt] option ", k, " needs a value");
    const std::string v = argv[++i];
    if (k == "--name")
      a.name = v;
    else if (k == "--layers")
      a.model.n_layer = positive(k, v);
    else if (k == "--embd")
      a.model.n_embd = positive(k, v);
    else if (k == "--heads")
      a.model.n_head = positive(k, v);
    else if (k == "--vocab")
      a.model.vocab_size = positive(k, v);
    else if (k == "--ctx")
      a.model.block_size = positive(k, v);
    else if (k == "--batch")
      a.batch = positive(k, v);
    else if (k == "--steps")
      a.steps = positive(k, v);
    else if (k == "--warmup")
      a.warmup = std::max<int64_t>(0, std::atoll(v.c_str()));
    else if (k == "--threads")
      a.threads = std::atoi(v.c_str());
    else if (k == "--checkpointing")
      a.model.activation_checkpointing = v == "1" || v == "true";
    else if (k == "--seed")
      a.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--sparse")
      a.sparse = v == "1" || v == "true";
    else if (k == "--backend")
      a.backend = v;
    else if (k == "--family") {
      ZT_CHECK(v == "gpt" || v == "llama", "[bench_gpt] --family: '", v, "' is not gpt or llama");
      a.family = v;
    } else if (k == "--kv-heads")
      a.kv_heads = positive(k, v);
    else if (k == "--ffn")
      a.ffn = positive(k, v);
    else if (k == "--tie")
      a.tie = v == "1" || v == "true";
    else if (k == "--device") {
      ZT_CHECK(v == "cpu" || v == "cuda", "[bench_gpt] --device: '", v, "' is not cpu or cuda");
      a.device = v;
    }
    else if (k == "--inflight")
      a.inflight = std::atoll(v.c_str());
    else if (k == "--bucket")
      a.bucket = positive(k, v);
    else if (k == "--products") {
      a.products = split(v);
      for (const auto& p : a.products)
        ZT_CHECK(p == "auto" || p == "native" || p == "f32" || p == "f32-per-product", "[bench_gpt] --products: '", p,
                 "' is not auto, native, f32 or f32-per-product");
    } else if (k == "--dtype") {
      a.dtypes.clear();
      for (const auto& d : split(v)) a.dtypes.push_back(dtype_from_name(d));
    } else if (k == "--stages") {
      a.stages.clear();
      for (const auto& s : split(v)) {
        ZT_CHECK(s.size() == 1 && s[0] >= '0' && s[0] <= '3', "[bench_gpt] --stages: '", s, "' is not 0, 1, 2 or 3");
        a.stages.push_back(s[0] - '0');
      }
    } else
      ZT_THROW("[bench_gpt] unknown option ", k,
               "; allowed --name --layers --embd --heads --vocab --ctx --batch --dtype --stages --steps --warmup "
               "--threads --checkpointing --seed --backend --bucket --inflight --sparse --products --device --family "
               "--kv-heads --ffn --tie");
  }
  a.model.seed = a.seed;
  a.model.validate("bench_gpt");
  return a;
}

// Note [bench tokens]: token i of the run is splitmix64(seed + i) mod vocab, i counting rows of
// ctx + 1 tokens over the global batch of each step in order; bench/torch_gpt.py computes the same.
using zt::splitmix64;

// Rank r's rows [r*batch, (r+1)*batch) of global step s: x = the first ctx tokens, y = the last ctx.
std::pair<Tensor, Tensor> batch_of(const Args& a, int64_t step, int64_t rank, int64_t world) {
  const int64_t T = a.model.block_size, row0 = step * a.batch * world + rank * a.batch;
  std::vector<int32_t> x(size_t(a.batch * T)), y(x.size());
  for (int64_t b = 0; b < a.batch; ++b) {
    const uint64_t first = a.seed + uint64_t((row0 + b) * (T + 1));
    for (int64_t t = 0; t < T; ++t) {
      x[size_t(b * T + t)] = int32_t(splitmix64(first + uint64_t(t)) % uint64_t(a.model.vocab_size));
      y[size_t(b * T + t)] = int32_t(splitmix64(first + uint64_t(t + 1)) % uint64_t(a.model.vocab_size));
    }
  }
  return {Tensor::from_ints(x, {a.batch, T}), Tensor::from_ints(y, {a.batch * T})};
}

struct Result {
  double step_s_median, step_s_mean, tokens_per_s, final_loss;
  int64_t params, peak_bytes, states_bytes;
  zero::CommOverlap reduce, gather;  // summed over the timed steps (Note [overlap])
};

Result run(int stage, DType dt, bool f32_compute, const Args& a, const comm::GroupPtr& g) {
  const int64_t world = g->size(), T = a.model.block_size;
  std::vector<std::pair<Tensor, Tensor>> batches;  // made before timing: token hashing is not training
  for (int64_t s = 0; s < a.warmup + a.steps; ++s) batches.push_back(batch_of(a, s, g->rank(), world));
  Allocator::global().release_cached();
  Allocator::global().reset_peaks();
  const size_t base = Allocator::global().stats().total_current;
  auto model = make_model(a);
  zero::EngineOptions o;
  o.zero.stage = stage;
  o.dtype = dt;
  o.f32_compute = f32_compute;  // as `train` decides it (Note [f32 compute])
  o.zero.reduce_bucket_size = a.bucket;
  o.max_inflight_reduce_elems = a.inflight > 0 ? a.inflight : 4 * a.bucket;
  o.zero.stage3_prefetch_bucket_size = std::min<int64_t>(a.bucket, o.zero.stage3_prefetch_bucket_size);
  o.sparse_gradients = a.sparse;
  o.optimizer.type = "AdamW";
  o.optimizer.lr = 1e-4f;
  o.optimizer.weight_decay = 0.01f;  // torch.optim.AdamW's default
  zero::Engine engine(*model, g, o);
  const bench::TimedSteps t = bench::time_steps(*g, a.warmup, a.steps, [&](int64_t s) {
    const auto& [x, y] = batches[size_t(s)];
    Tensor logits = engine.forward(std::vector<Tensor>{x});
    Tensor l = ag::cross_entropy(ag::reshape(logits, {a.batch * T, a.model.vocab_size}), y);
    engine.backward(l);
    return std::make_pair(engine.step(1e-4), l);
  });
  comm::CollOptions max;
  max.op = comm::ReduceOp::max;
  const double peak = g->all_reduce_scalar(double(Allocator::global().stats().total_peak - base), max);
  return {t.median_s,
          t.mean_s,
          double(a.batch * world * T * a.steps) / t.total_s,
          t.last_loss,
          engine.num_params(),
          int64_t(peak),
          engine.expected_memory().total(),
          t.reduce,
          t.gather};
}

// The model on GPU 0 without the engine (Module::to, AdamW through optim::update's device path;
// 16-bit runs keep fp32 masters): what the engine on a device is to be measured against. One JSON
// line per dtype with MFU: flops per token 6N + 12·L·T·d (PaLM's count, the tied wte once, as it
// also makes the logits) against the peak given by ZT_PEAK_TFLOPS (default: H100 SXM's dense 989
// for 16-bit, 67 for f32, since the f32 products do not use TF32).
void run_on_device(DType dt, const Args& a) {
  const Device dev = Device::cuda(0);
  const int64_t T = a.model.block_size;
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (int64_t s = 0; s < a.warmup + a.steps; ++s) {
    auto [x, y] = batch_of(a, s, 0, 1);
    batches.emplace_back(x.to(dev), y.to(dev));
  }
  Allocator& alloc = allocator_for(dev);
  auto model = make_model(a);
  model->to(dev);
  const std::vector<Tensor> params = model->parameters();
  std::vector<Tensor> masters(params.size());
  std::vector<std::vector<Tensor>> states;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    if (dt != DType::f32) {
      masters[i] = p.clone();
      const Tensor low = p.to(dt);
      p.rebind(low.storage(), low.offset(), dt);
    }
    states.push_back({Tensor::zeros(p.shape(), DType::f32, dev), Tensor::zeros(p.shape(), DType::f32, dev)});
  }
  config::OptimizerConfig opt;
  opt.lr = 1e-4;
  alloc.reset_peaks();
  comm::GroupPtr one = comm::make_group("local");
  const bench::TimedSteps t = bench::time_steps(*one, a.warmup, a.steps, [&](int64_t s) {
    const auto& [x, y] = batches[size_t(s)];
    for (const Tensor& p : params) autograd::set_grad(p, Tensor());
    Tensor logits = (*model)(std::vector<Tensor>{x});
    Tensor l = ag::cross_entropy(ag::reshape(logits, {a.batch * T, a.model.vocab_size}), y);
    autograd::backward(l);
    for (size_t i = 0; i < params.size(); ++i)
      optim::update(opt, {params[i], masters[i], autograd::grad(params[i]), states[i], 1e-4f, s + 1, 1.f, Tensor()});
    synchronize(dev);  // a step's time is its device time
    return std::make_pair(zero::StepStats{}, l);
  });
  int64_t n = 0;
  for (const Tensor& p : params) n += p.numel();
  const auto& m = a.model;
  const double flops_per_token = 6.0 * double(n) + 12.0 * double(m.n_layer * T * m.n_embd);
  const double tokens_per_s = double(a.batch * T * a.steps) / t.total_s;
  const char* peak_env = std::getenv("ZT_PEAK_TFLOPS");
  const double peak = peak_env ? std::atof(peak_env) : dt == DType::f32 ? 67.0 : 989.0;
  std::printf(
      "{\"bench\":\"gpt_train\",\"impl\":\"zerotrain\",\"variant\":\"device, no engine\",\"device\":\"%s\","
      "\"model\":\"%s\",\"layers\":%lld,\"embd\":%lld,\"heads\":%lld,\"vocab\":%lld,\"ctx\":%lld,\"params\":%lld,"
      "\"dtype\":\"%s\",\"batch\":%lld,\"steps\":%lld,\"warmup\":%lld,\"tokens_per_s\":%.1f,\"step_s\":%.5f,"
      "\"step_s_mean\":%.5f,\"final_loss\":%.4f,\"device_peak_mib\":%.1f,\"flops_per_token\":%.0f,"
      "\"peak_tflops\":%.0f,\"mfu\":%.4f,\"timing\":\"step_s=median per step, device synchronised; "
      "mfu=tokens_per_s*(6N+12LTd)/peak\"}\n",
      dev.str().c_str(), a.name.c_str(), (long long)m.n_layer, (long long)m.n_embd, (long long)m.n_head,
      (long long)m.vocab_size, (long long)T, (long long)n, dtype_name(dt), (long long)a.batch, (long long)a.steps,
      (long long)a.warmup, tokens_per_s, t.median_s, t.mean_s, t.last_loss,
      double(alloc.stats().total_peak) / 1048576.0, flops_per_token, peak, tokens_per_s * flops_per_token / (peak * 1e12));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (a.device == "cuda") {
      for (DType dt : a.dtypes) run_on_device(dt, a);
      return 0;
    }
    comm::GroupPtr g = comm::make_group(a.backend);
    const int world = g->size();
    const std::vector<int> stages =
        a.stages.empty() ? (world == 1 ? std::vector<int>{0} : std::vector<int>{0, 1, 2, 3}) : a.stages;
    const int threads = a.threads > 0 ? a.threads : bench::default_threads();
    set_num_threads(threads);
    // Each dtype; a 16-bit one once per product path asked for (Note [16-bit products]).
    std::vector<std::pair<DType, std::string>> runs;
    for (DType dt : a.dtypes)
      if (dt == DType::f32)
        runs.emplace_back(dt, "");
      else
        for (const std::string& p : a.products) runs.emplace_back(dt, p);
    for (const auto& [dt, setting] : runs) {
      std::string products;  // the JSON fields of a 16-bit run's product path
      bool f32_compute = false;
      if (!setting.empty()) {
        const int64_t embd = a.model.n_embd;
        const bool per_product = setting == "f32-per-product";
        const zero::ProductsChoice c =
            zero::choose_products(*g, dt, per_product ? "f32" : setting, {a.batch * a.model.block_size, embd, 4 * embd});
        f32_compute = !per_product && c.f32_compute(a.device == "cuda" ? Device::cuda(0) : Device::cpu());
        if (g->rank() == 0) std::fprintf(stderr, "bench_gpt: %s\n", c.line(dt, f32_compute).c_str());
        products = "\"products\":\"" + std::string(ops::products_name(c.products)) + "\",\"products_setting\":\"" +
                   setting + "\",\"f32_compute\":" + (f32_compute ? "true" : "false") + ",";
      }
      for (int stage : stages) {
        const Result r = run(stage, dt, f32_compute, a, g);
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);
        comm::CollOptions max;
        max.op = comm::ReduceOp::max;
        const double rss_mib = g->all_reduce_scalar(double(ru.ru_maxrss) / 1024.0, max);
        if (g->rank() != 0) continue;
        const auto& m = a.model;
        std::printf(
            "{\"bench\":\"gpt_train\",\"impl\":\"zerotrain\",\"model\":\"%s\",\"family\":\"%s\",\"layers\":%lld,\"embd\":%lld,"
            "\"heads\":%lld,\"vocab\":%lld,\"ctx\":%lld,\"params\":%lld,\"backend\":\"%s\",\"world\":%d,"
            "\"threads\":%d,\"stage\":%d,\"dtype\":\"%s\",\"checkpointing\":%s,\"sparse_gradients\":%s,\"batch\":%lld,"
            "\"global_batch\":%lld,"
            "\"steps\":%lld,\"warmup\":%lld,\"tokens_per_s\":%.1f,\"step_s\":%.4f,\"step_s_mean\":%.4f,"
            "\"final_loss\":%.4f,\"peak_mib\":%.1f,\"states_mib\":%.1f,\"peak_rss_mib\":%.1f,"
            "%s%s"
            "\"timing\":\"step_s=median per step (rank 0); tokens_per_s=global tokens*steps/total (slowest rank); "
            "peak_mib=allocator peak, peak_rss_mib=process peak RSS (max over ranks)\"}\n",
            a.name.c_str(), a.family.c_str(), (long long)m.n_layer, (long long)m.n_embd, (long long)m.n_head,
            (long long)m.vocab_size, (long long)m.block_size, (long long)r.params, g->backend(), world, threads, stage, dtype_name(dt),
            m.activation_checkpointing ? "true" : "false", a.sparse ? "true" : "false", (long long)a.batch,
            (long long)(a.batch * world), (long long)a.steps, (long long)a.warmup, r.tokens_per_s, r.step_s_median,
            r.step_s_mean, r.final_loss, double(r.peak_bytes) / 1048576.0, double(r.states_bytes) / 1048576.0, rss_mib,
            bench::overlap_fields(r.reduce, r.gather).c_str(), products.c_str());
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_gpt: %s\n", e.what());
    return 1;
  }
}
