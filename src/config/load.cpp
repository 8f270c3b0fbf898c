// Reading a config file, `key=value` overrides, and DeepSpeed's batch-size rule.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "json_check.h"
#include "zt/config/config.h"
#include "zt/core/error.h"
#include "zt/core/json_keys.h"
#include "zt/core/strings.h"

namespace zt::config {
namespace {

// "line L, column C" of a byte offset (1-based, as editors count).
std::string line_col(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n')
      ++line, col = 1;
    else
      ++col;
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at ...: " prefix.
std::string parse_reason(const std::string& what) {
  size_t p = what.find(": ");
  return p == std::string::npos ? what : what.substr(p + 2);
}

// True when `s` is valid UTF-8 (nlohmann cannot write a string that is not).
bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// Note [duplicate JSON keys]: `what` names the file or the override; `at` is the dotted key the
// text is the value of ("" for a file).
nlohmann::json parse_json(const std::string& text, const std::string& what, const std::string& at,
                          bool allow_exceptions) {
  auto on_duplicate = [&](const std::string& key, const std::string& inner) {
    const std::string where = at.empty() || inner.empty() ? at + inner : at + (inner[0] == '[' ? "" : ".") + inner;
    ZT_THROW_AS(ErrorKind::config, "[config] ", what, ": duplicate key '", detail::clip(key), "' in ",
                where.empty() ? "the top-level object" : "object '" + detail::clip(where) + "'",
                " (each key may appear once)");
  };
  return parse_unique_keys<nlohmann::json>(text, on_duplicate, allow_exceptions);
}

}  // namespace

nlohmann::json detail::read_hf_config(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path file = std::filesystem::path(dir) / "config.json";
  if (dir.empty() || !std::filesystem::is_directory(dir, ec) || !std::filesystem::is_regular_file(file, ec))
    return nullptr;
  const uintmax_t bytes = std::filesystem::file_size(file, ec);
  ZT_CHECK_AS(ErrorKind::config, !ec && bytes <= (16u << 20), "[config] ", file.string(),
              ": not a Hugging Face config.json (more than 16 MiB, or unreadable)");
  std::ifstream in(file, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  ZT_CHECK_AS(ErrorKind::config, text.find('\0') == std::string::npos &&
                                     json_depth_exceeded_at(text, kMaxJsonDepth) == std::string::npos,
              "[config] ", file.string(), ": not JSON text (a NUL byte, or nesting past ", kMaxJsonDepth, " levels)");
  nlohmann::json j = parse_json(text, file.string(), "", false);
  ZT_CHECK_AS(ErrorKind::config, j.is_object(), "[config] ", file.string(), ": not a JSON object");
  return j;
}

void apply_overrides(nlohmann::json& j, const std::vector<std::string>& overrides) {
  ZT_CHECK_AS(ErrorKind::config, j.is_object(), "[config] overrides need a JSON object at the top level, got ",
              detail::short_dump(j));
  for (const auto& o : overrides) {
    const std::string shown = detail::clip(o);  // an override may be megabytes long
    const size_t eq = o.find('=');
    ZT_CHECK_AS(ErrorKind::config, eq != std::string::npos && eq > 0, "[config] override '", shown,
                "' must look like key=value (e.g. optimizer.params.lr=3e-4)");
    ZT_CHECK_AS(ErrorKind::config, valid_utf8(o), "[config] override '", shown, "' is not valid UTF-8");
    const std::string key = o.substr(0, eq), text = o.substr(eq + 1);
    std::vector<std::string> parts;
    std::stringstream ss(key);
    for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
    // The value is JSON when it parses as JSON (numbers, true/false, lists), else a plain string.
    // nlohmann parses without recursion; the sections the key walks count as levels too.
    nlohmann::json value = parse_json(text, "override '" + shown + "'", key, false);
    const bool deep =
        parts.size() >= size_t(kMaxJsonDepth) || !detail::deep_key(value, kMaxJsonDepth - int(parts.size())).empty();
    ZT_CHECK_AS(ErrorKind::config, !deep, "[config] override '", shown, "' nests deeper than ", kMaxJsonDepth,
                " levels of sections, lists and objects (the limit)");
    nlohmann::json* node = &j;
    std::string walked;
    for (size_t i = 0; i < parts.size(); ++i) {
      ZT_CHECK_AS(ErrorKind::config, !parts[i].empty() && key.back() != '.', "[config] override '", shown,
                  "': empty key segment in '", detail::clip(key), "'");
      if (i + 1 == parts.size()) break;
      walked += (walked.empty() ? "" : ".") + parts[i];
      nlohmann::json& next = (*node)[parts[i]];  // creates a null for a new section
      if (next.is_null()) next = nlohmann::json::object();
      ZT_CHECK_AS(ErrorKind::config, next.is_object(), "[config] override '", shown, "': '", detail::clip(walked),
                  "' is not an object (it is ", detail::short_dump(next), ")");
      node = &next;
    }
    (*node)[parts.back()] = value.is_discarded() ? nlohmann::json(text) : std::move(value);
  }
}

Config load(const std::string& path, const std::vector<std::string>& overrides, const std::string& weights) {
  std::ifstream in(path, std::ios::binary);
  ZT_CHECK_AS(ErrorKind::config, in.good(), "[config] ", path, ": cannot open config file (", std::strerror(errno),
              ")");
  std::stringstream buf;
  buf << in.rdbuf();
  return load_text(buf.str(), path, overrides, weights);
}

Config load_text(const std::string& text, const std::string& path, const std::vector<std::string>& overrides,
                 const std::string& weights) {
  // nlohmann stops reading at a NUL byte, so whatever follows one would go unread.
  const size_t nul = text.find('\0');
  ZT_CHECK_AS(ErrorKind::config, nul == std::string::npos, "[config] ", path, ": a NUL byte at byte offset ", nul, " (",
              line_col(text, nul), "); a config file is JSON text");
  // Before parsing: deep nesting would overflow the stack later (Note [hostile JSON]).
  const size_t deep = json_depth_exceeded_at(text, kMaxJsonDepth);
  ZT_CHECK_AS(ErrorKind::config, deep == std::string::npos, "[config] ", path, ": JSON nests deeper than ",
              kMaxJsonDepth, " levels at byte offset ", deep, " (", line_col(text, deep), "; the limit is ",
              kMaxJsonDepth, ")");
  nlohmann::json j;
  try {
    j = parse_json(text, path, "", true);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based: the byte at which parsing failed.
    const size_t at = e.byte > 0 ? e.byte - 1 : 0;
    ZT_THROW_AS(ErrorKind::config, "[config] ", path, ": invalid JSON at byte offset ", at, " (", line_col(text, at),
                "): ", detail::clip(parse_reason(e.what())));
  } catch (const nlohmann::json::exception& e) {  // out_of_range: a number too large for a double
    const std::string what = e.what();
    ZT_THROW_AS(ErrorKind::config, "[config] ", path,
                ": invalid JSON: ", detail::clip(what.substr(what.find("] ") + 2)));
  }
  ZT_CHECK_AS(ErrorKind::config, j.is_object(), "[config] ", path, ": the top level must be a JSON object, got ",
              detail::short_dump(j));
  apply_overrides(j, overrides);
  return parse(j, overrides.empty() ? path : path + " (with overrides)", weights);
}

BatchSizes resolve_batch(const Config& c, int world_size) {
  ZT_CHECK(world_size >= 1, "[config] resolve_batch: world size must be >= 1, got ", world_size);
  const auto is_auto = [&](const char* key) {
    return std::find(c.auto_batch_keys.begin(), c.auto_batch_keys.end(), key) != c.auto_batch_keys.end();
  };
  const int64_t w = world_size, t = c.train_batch_size, g = c.gradient_accumulation_steps;
  // Note [auto values]: an "auto" micro-batch that nothing else gives is the run's per-device one.
  const int64_t m = c.train_micro_batch_size_per_gpu == 0 && t == 0 && is_auto("train_micro_batch_size_per_gpu")
                        ? c.run.per_device_train_batch_size
                        : c.train_micro_batch_size_per_gpu;
  auto show = [](const char* name, int64_t v) {
    return v > 0 ? zt::detail::concat(name, " ", v) : zt::detail::concat(name, " (not set)");
  };
  // Under the parameter server the batch is split over the workers, not the whole world.
  const int servers = c.run.strategy == "parameter_server" ? c.run.parameter_servers : 0;
  const std::string ranks =
      servers > 0 ? zt::detail::concat(w, " workers (world size ", w + servers, " less ", servers,
                                       servers == 1 ? " server)" : " servers)")
                  : zt::detail::concat("world size ", w);
  const std::string all =
      zt::detail::concat(show("train_batch_size", t), ", ", show("train_micro_batch_size_per_gpu", m), ", ",
                         show("gradient_accumulation_steps", g), ", ", ranks);
  ZT_CHECK_AS(ErrorKind::config, t > 0 || m > 0, "[config] set train_batch_size or train_micro_batch_size_per_gpu (",
              all, ")");
  // Divides t by the product of the two known factors; throws unless exact.
  auto derive = [&](int64_t a, int64_t b, const char* missing) {
    int64_t d = 0;
    ZT_CHECK_AS(ErrorKind::config, !__builtin_mul_overflow(a, b, &d) && t % d == 0, "[config] cannot derive ", missing,
                ": train_batch_size ", t, " is not a multiple of ", a, " * ", b, " (", all, ")");
    return t / d;
  };
  BatchSizes out{t, m, g};
  if (t > 0 && m > 0 && g > 0) {
    int64_t p = 0;
    bool ok = !__builtin_mul_overflow(m, g, &p) && !__builtin_mul_overflow(p, w, &p) && p == t;
    ZT_CHECK_AS(ErrorKind::config, ok, "[config] train_batch_size ", t, " != train_micro_batch_size_per_gpu ", m,
                " * gradient_accumulation_steps ", g, " * ", ranks);
  } else if (t > 0 && m > 0) {
    out.accumulation = derive(m, w, "gradient_accumulation_steps");
  } else if (t > 0 && g > 0) {
    out.micro = derive(g, w, "train_micro_batch_size_per_gpu");
  } else if (t > 0) {
    out.accumulation = 1;
    out.micro = derive(1, w, "train_micro_batch_size_per_gpu");
  } else {  // micro given, train_batch_size derived
    out.accumulation = g > 0 ? g : 1;
    bool ok = !__builtin_mul_overflow(m, out.accumulation, &out.train_batch_size) &&
              !__builtin_mul_overflow(out.train_batch_size, w, &out.train_batch_size);
    ZT_CHECK_AS(ErrorKind::config, ok, "[config] train_batch_size overflows 64 bits (", all, ")");
  }
  return out;
}

int data_parallel_ranks(const Config& c, int world_size) {
  if (c.run.strategy != "parameter_server") return world_size;
  const int s = c.run.parameter_servers;
  ZT_CHECK_AS(ErrorKind::config, world_size >= 2, "[config] run.strategy parameter_server needs at least 2 ranks ",
              "(a server and a worker), got world size ", world_size);
  ZT_CHECK_AS(ErrorKind::config, s < world_size, "[config] run.parameter_servers = ", s,
              " leaves no worker at world size ", world_size, " (it must be less than the world size; the nearest ",
              "valid value is ", world_size - 1, ")");
  return world_size - s;
}

std::vector<std::string> batch_notes(const Config& c, const BatchSizes& b, int world_size) {
  std::vector<std::string> lines;
  for (const std::string& key : c.auto_batch_keys) {
    const int64_t v = key == "train_batch_size" ? b.train_batch_size
                      : key == "train_micro_batch_size_per_gpu" ? b.micro
                                                                : b.accumulation;
    lines.push_back(key + ": \"auto\" -> " + std::to_string(v) + " (train_batch_size " +
                    std::to_string(b.train_batch_size) + " = micro-batch " + std::to_string(b.micro) +
                    " x accumulation " + std::to_string(b.accumulation) + " x " + std::to_string(world_size) +
                    " ranks" +
                    (key == "train_micro_batch_size_per_gpu" && c.train_batch_size == 0
                         ? "; run.per_device_train_batch_size"
                         : "") +
                    ")");
  }
  return lines;
}

}  // namespace zt::config
