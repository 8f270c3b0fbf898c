#pragma once
// Note [duplicate JSON keys]: nlohmann keeps the last of two equal keys in an object without a
// word, so a hostile file could hide a value behind another. Every reader of such files (config,
// safetensors header) parses through parse_unique_keys, which refuses them. A template over the
// JSON type, so zt_core itself needs no JSON library.
#include <set>
#include <string>
#include <vector>

namespace zt {

// Parses `text` like Json::parse(text, cb, allow_exceptions); on an object's second use of a key,
// calls on_duplicate(key, where), which must throw. `where` is the object's path ("model",
// "a.b[2]"), "" for the top level; array elements count from 0.
template <class Json, class OnDuplicate>
Json parse_unique_keys(const std::string& text, OnDuplicate&& on_duplicate, bool allow_exceptions = true) {
  struct Frame {
    bool array;
    std::set<std::string> keys;  // objects: the keys seen so far
    std::string key;             // objects: the member being read
    size_t index = 0;            // arrays: the element being read
  };
  std::vector<Frame> open;
  auto path = [&] {  // of the innermost open container
    std::string p;
    for (size_t i = 0; i + 1 < open.size(); ++i) {
      if (open[i].array) {
        p.append("[").append(std::to_string(open[i].index)).append("]");
      } else {
        if (!p.empty()) p.append(".");
        p.append(open[i].key);
      }
    }
    return p;
  };
  auto element_done = [&] {
    if (!open.empty() && open.back().array) ++open.back().index;
  };
  auto cb = [&](int, typename Json::parse_event_t ev, Json& v) {
    using E = typename Json::parse_event_t;
    if (ev == E::object_start || ev == E::array_start) {
      open.push_back(Frame{ev == E::array_start, {}, {}, 0});
    } else if (ev == E::object_end || ev == E::array_end) {
      open.pop_back();
      element_done();
    } else if (ev == E::key) {
      Frame& f = open.back();
      f.key = v.template get<std::string>();
      if (!f.keys.insert(f.key).second) on_duplicate(f.key, path());
    } else {  // a scalar value
      element_done();
    }
    return true;
  };
  return Json::parse(text, cb, allow_exceptions);
}

}  // namespace zt
