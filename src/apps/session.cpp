#include "session.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <optional>
#include <set>

#include "models/hf.h"
#include "models/model_kind.h"
#include "zt/ckpt/hf_folder.h"
#include "zt/ckpt/safetensors.h"
#include "zt/core/affinity.h"
#include "zt/core/allocator.h"
#include "zt/core/device_capacity.h"
#include "zt/core/sha256.h"
#include "zt/core/strings.h"
#include "zt/data/cifar.h"
#include "zt/ops/ops.h"
#include "zt/optim/schedule.h"

namespace zt::apps {

std::shared_ptr<nn::Module> build_model(const config::Config& c, bool deferred) {
  std::optional<nn::DeferredInit> defer;  // Note [deferred init]
  if (deferred) defer.emplace();
  return model_kind(c).build(c, deferred);
}

std::shared_ptr<nn::Module> build_within_memory(int64_t params, bool deferred,
                                                const std::function<std::shared_ptr<nn::Module>()>& make) {
  int64_t bytes = 0;
  ZT_CHECK_AS(ErrorKind::out_of_memory, params >= 0 && !__builtin_mul_overflow(params, int64_t(4), &bytes),
              "[model] ", params, " parameters: more fp32 bytes than 64-bit sizes can count");
  const std::string needs = "the model's " + std::to_string(params) + " parameters need " + std::to_string(bytes) +
                            " bytes (" + format_bytes(size_t(bytes)) + ") in fp32";
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const double machine = pages > 0 && page > 0 ? double(pages) * double(page) : 0;
  // A deferred model takes no memory here (estimate plans models bigger than this machine; the
  // engine materialises one shard of them).
  ZT_CHECK_AS(ErrorKind::out_of_memory, deferred || machine == 0 || double(bytes) <= machine, "[model] ", needs,
              ", more than this machine's ", format_bytes(size_t(machine)), " of memory");
  try {
    return make();
  } catch (const std::bad_alloc&) {
    ZT_THROW_AS(ErrorKind::out_of_memory, "[model] ", needs, "; the system refused the memory");
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::out_of_memory) throw;
    ZT_THROW_AS(ErrorKind::out_of_memory, "[model] ", needs, ": ", e.what());
  }
}


std::string load_weights(const config::Config& c, nn::Module& model, const std::string& path, bool say) {
  if (ckpt::is_hf_folder(path)) return load_hf_weights(c, model, path, say);
  ckpt::LoadedTensors w = ckpt::load_safetensors(path);
  std::vector<std::string> missing, misshapen, unused;
  std::set<std::string> names;
  int64_t loaded = 0;
  for (auto& [name, p] : model.named_parameters()) {
    names.insert(name);
    const Tensor* t = w.find(name);
    if (!t) {
      missing.push_back(name);
    } else if (!is_floating(t->dtype())) {
      w.weight(name, p.shape());  // throws: integer weights are a broken file, not a misfit
    } else if (t->shape() != p.shape()) {
      misshapen.push_back(name + " " + dtype_name(t->dtype()) + " " + shape_str(t->shape()) + " in the file, " +
                          shape_str(p.shape()) + " expected");
    } else {
      Tensor dst = p;
      dst.copy_(*t);
      ++loaded;
    }
  }
  for (const auto& [name, t] : w.tensors)
    if (!names.count(name)) unused.push_back(name);
  std::string problems;
  for (auto [what, v] : {std::pair{"missing", &missing}, std::pair{"unused", &unused}, std::pair{"misshapen", &misshapen}})
    if (!v->empty()) problems += (problems.empty() ? "" : "; ") + std::string(what) + ": " + join(*v, ", ");
  ZT_CHECK_AS(ErrorKind::config, problems.empty() || !c.model.init_strict, "[model] ", path,
              " does not fit the model: ", problems, " (model.init_strict=false loads what fits and names the rest)");
  ZT_CHECK_AS(ErrorKind::checkpoint, loaded > 0, "[model] ", path, " holds none of the model's parameter names");
  if (say && !problems.empty())
    std::fprintf(stderr, "zerotrain: model.init_strict=false: from %s, left out %s\n", path.c_str(), problems.c_str());
  return std::to_string(loaded) + " tensors from " + path +
         (missing.empty() ? "" : "; initialised fresh: " + join(missing, ", "));
}

data::Dataset load_image_split(const config::Config& c, const std::string& split) {
  const int64_t limit = split == "train" ? c.data.train_limit : c.data.test_limit;
  const config::ImageShape img = config::dataset_image_shape(c.data.dataset);
  data::Dataset ds;
  std::vector<float> black;  // the normalised value of pixel 0, per channel: what padding fills
  if (c.data.dataset == "cifar10") {
    ds = data::load_cifar10(c.data.dir, split, limit);
    for (int64_t ch = 0; ch < img.channels; ++ch) black.push_back(-data::kCifarMean[ch] / data::kCifarStd[ch]);
  } else {
    // Each dataset's own pixel statistics (training split).
    const bool fashion = c.data.dataset == "fashion-mnist";
    const float mean = fashion ? 0.2860f : 0.1307f, stddev = fashion ? 0.3530f : 0.3081f;
    ds = data::load_mnist(c.data.dir, split, mean, stddev, limit);
    black.push_back(-mean / stddev);
  }
  if (c.data.pad_to > 0) {  // padding needs the stored geometry
    ZT_CHECK_AS(ErrorKind::data, ds.images.size(1) == img.channels * img.size * img.size, "[data] the ", split,
                " split in ", c.data.dir, " has ", ds.images.size(1), " features per image, not ", c.data.dataset,
                "'s ", img.channels, " x ", img.size, " x ", img.size, ", so data.pad_to cannot pad it");
    if (c.data.pad_to > img.size) ds = data::pad_images(ds, img.channels, img.size, c.data.pad_to, black);
  }
  const ModelKind& kind = model_kind(c);
  ZT_CHECK_AS(ErrorKind::config, kind.input_features, "[config] model.type '", c.model.type,
              "' does not take images (data.dataset ", c.data.dataset, ")");
  const int64_t want = kind.input_features(c);
  ZT_CHECK_AS(ErrorKind::config, ds.images.size(1) == want, "[config] the ", split, " split of ", c.data.dataset,
              " has ", ds.images.size(1), " features per sample", c.data.pad_to > 0 ? " after data.pad_to" : "",
              " but the model takes ", want, kind.input_keys);
  return ds;
}

namespace {
// DeepSpeed's dtype names in the config ("" = the working dtype).
std::optional<DType> ds_dtype(const std::string& name) {
  if (name.empty()) return std::nullopt;
  return name == "fp32" ? DType::f32 : name == "fp16" ? DType::f16 : DType::bf16;
}
}  // namespace

Device run_device(const std::string& d) {
  if (d == "cpu") return Device::cpu();
  if (d == "sim") return Device::sim();
  const auto b = ops::backends();
  ZT_CHECK_AS(ErrorKind::config, std::find(b.begin(), b.end(), "cuda") != b.end(), "[config] run.device=", d,
              ": this build has no CUDA (configure with -DZT_WITH_CUDA=ON)");
  const int n = cuda_device_count();
  ZT_CHECK_AS(ErrorKind::config, n > 0, "[config] run.device=", d, ": no GPU is visible here (found 0)");
  int k = 0;
  if (d == "cuda") {
    k = local_rank_from_env().rank % n;  // one GPU per rank of this node, as NCCL's group takes
  } else {
    k = std::atoi(d.c_str() + 5);
  }
  ZT_CHECK_AS(ErrorKind::config, k < n, "[config] run.device=", d, ": this machine has ", n, n == 1 ? " GPU" : " GPUs",
              " (cuda:0 to cuda:", n - 1, ")");
  return Device::cuda(k);
}

int64_t device_cap_bytes(const config::Config& c, Device d, std::optional<size_t> capacity) {
  if (d.is_cpu()) return 0;
  const int64_t holds = int64_t(capacity.value_or(device_capacity(d)));
  if (c.run.device_memory_mb == 0) return holds;
  ZT_CHECK_AS(ErrorKind::config, (c.run.device_memory_mb << 20) <= holds,
              "[config] run.device_memory_mb=", c.run.device_memory_mb, " is more than ", d, " holds (",
              format_bytes(size_t(holds)), d.type == DeviceType::sim ? ", ZT_SIM_MEMORY_MB" : "", "): at most ",
              holds >> 20, ", or 0 for the whole device");
  return c.run.device_memory_mb << 20;
}

Device open_run_device(const config::Config& c) {
  const Device d = run_device(c.run.device);
  const int64_t cap = device_cap_bytes(c, d);
  // As PyTorch's per-process memory fraction; without the key the device's own limit holds.
  if (c.run.device_memory_mb > 0) allocator_for(d).set_budget(size_t(cap));
  return d;
}

zero::EngineOptions engine_options(const config::Config& c, const config::BatchSizes& b) {
  zero::EngineOptions o;
  o.zero = c.zero;
  o.optimizer = c.optimizer;
  o.fp16 = c.fp16;
  o.aio = c.aio;
  o.dtype = c.bf16 ? DType::bf16 : c.fp16.enabled ? DType::f16 : DType::f32;
  o.device = run_device(c.run.device);
  o.communication_data_type = ds_dtype(c.communication_data_type);
  o.grad_accum_dtype = ds_dtype(c.grad_accum_dtype);
  o.gradient_accumulation_steps = b.accumulation;
  o.gradient_clipping = c.gradient_clipping;
  o.sparse_gradients = c.sparse_gradients;
  // Note [placement]: swap files under <nvme_path>/<run.dir's name and path hash>/rank<r>/
  o.run_name = zero::swap_run_name(c.run.dir);
  return o;
}

config::BatchSizes check_run_settings(const config::Config& c, int world) {
  const config::BatchSizes bs = config::resolve_batch(c, config::data_parallel_ranks(c, world));
  if (c.run.strategy == "zero") zero::check_hpz_partition(c.zero.zero_hpz_partition_size, world);
  // Any run length will do: it only stands in for an absent total_num_steps.
  (void)optim::make_schedule(c.scheduler.type, c.scheduler.params, c.optimizer.lr, /*total_steps=*/1);
  return bs;
}

std::string mem_summary(Device device) {
  MemStats s = allocator_for(device).stats();
  std::string out = device.is_cpu() ? "" : device.str() + ": ";
  for (MemTag t : {MemTag::param, MemTag::grad, MemTag::master, MemTag::optim, MemTag::activation, MemTag::comm}) {
    if (s.peak_of(t) == 0) continue;
    out += std::string(mem_tag_name(t)) + "=" + format_bytes(s.of(t)) + " ";
  }
  return out + "activation-peak=" + format_bytes(s.peak_of(MemTag::activation)) + " peak=" + format_bytes(s.total_peak);
}

void print_config_notes(const config::Config& cfg, const config::BatchSizes& bs, int world) {
  for (const std::string& line : config::batch_notes(cfg, bs, world))
    std::fprintf(stderr, "zerotrain: config: %s\n", line.c_str());
  for (const std::string& line : cfg.notes) std::fprintf(stderr, "zerotrain: config: %s\n", line.c_str());
}

std::string kept_tokenizer_name(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  if (name == "encoder.json" || name == "vocab.bpe" || name == "vocab.json") return name;  // GPT-2's, BERT's
  return std::filesystem::path(path).extension() == ".model" ? "tokenizer.model" : "tokenizer.json";
}

std::vector<std::string> manifest_tokenizer_files(const config::Config& c, std::string* problem) {
  if (c.data.dataset != "tokens") return {};
  std::ifstream in(c.data.dir + "/manifest.json");
  const nlohmann::json m = in ? nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
  if (!m.is_object() || !m.contains("tokenizer") || !m["tokenizer"].is_object()) return {};
  const nlohmann::json& files = m["tokenizer"].value("files", nlohmann::json());
  if (!files.is_array()) return {};
  std::vector<std::string> out;
  for (const nlohmann::json& f : files) {
    const auto text = [&](const char* key) {
      return f.is_object() && f.contains(key) && f[key].is_string() ? f[key].get<std::string>() : std::string();
    };
    const std::string path = text("path"), want = text("sha256");
    if (path.empty() || !std::filesystem::is_regular_file(path) || sha256_file(path) != want) {
      if (problem) *problem = "the tokenizer file '" + path + "' of " + c.data.dir + "/manifest.json is missing or changed since prepare";
      return {};
    }
    out.push_back(path);
  }
  return out;
}

}  // namespace zt::apps
