// The configuration file and key=value overrides, as `zerotrain --config FILE KEY=VALUE...`
// reads them. Input: the file's text, then NUL-separated overrides. Every rejection must be a
// config error; what is accepted must be usable (printable, sizes that count). No model family is
// registered here (they live in apps, with the whole engine): the model section takes type and
// init_from, and the families' keys go through the same Section readers fuzzed here.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "zt/config/config.h"
#include "zt/core/error.h"

using namespace zt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  std::vector<std::string> overrides;
  for (size_t at = nul; at != std::string::npos;) {
    const size_t next = in.find('\0', at + 1);
    overrides.push_back(in.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1));
    at = next;
  }
  try {
    const config::Config c = config::load_text(in.substr(0, nul), "fuzz.json", overrides);
    (void)c.raw.dump();  // a run writes it into metrics.jsonl: must not throw
    if (c.run.threads < 0 || c.run.threads > config::kMaxThreads) std::abort();
    if (c.run.memory_budget_mb < 0 || c.run.memory_budget_mb > config::kMaxMemoryBudgetMb) std::abort();
    if (!(c.run.comm_timeout_s >= 0.1)) std::abort();
    // Paths never hold control characters (a NUL would cut them and every message naming them).
    for (const std::string* path : {&c.run.dir, &c.run.resume, &c.checkpoint.dir, &c.data.dir, &c.model.init_from,
                                    &c.zero.offload_optimizer.nvme_path, &c.zero.offload_param.nvme_path})
      for (char ch : *path)
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) std::abort();
    for (int world : {1, 3}) {
      try {
        const config::BatchSizes b = config::resolve_batch(c, world);
        if (b.micro < 1 || b.accumulation < 1 || b.train_batch_size != b.micro * b.accumulation * world) std::abort();
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::config) std::abort();
      }
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::config) std::abort();
  }
  return 0;
}
