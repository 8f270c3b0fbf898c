// Your own text (Note [your own text]): arbitrary bytes as a plain-text file and as JSON lines.
// Every rejection must be a data error; accepted text comes back byte for byte, and every JSON
// line's document is non-empty and named by its line.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "zt/core/error.h"
#include "zt/data/user_text.h"

using namespace zt;

namespace {

template <typename F>
bool accepted(F&& parse) {
  try {
    parse();
    return true;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::data) std::abort();
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<data::Document> docs;
  if (accepted([&] { docs = data::parse_text_input("in.txt", bytes, false); })) {
    if (docs.size() != 1 || docs[0].text != bytes || docs[0].name != "in.txt") std::abort();
  }
  if (accepted([&] { docs = data::parse_text_input("in.jsonl", bytes, true); })) {
    if (docs.empty()) std::abort();
    for (const data::Document& d : docs)
      if (d.text.empty() || d.name.rfind("in.jsonl:", 0) != 0) std::abort();
  }
  return 0;
}
