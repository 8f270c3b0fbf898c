// Arbitrary bytes as a tokenizer.json: a file that does not parse must be one data error; one that
// does must encode a fixed text to ids inside its vocabulary, and decode them without error.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_util.h"
#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

using namespace zt;

namespace {

// Every class the pre-tokenizers split on, added-token look-alikes, and bytes that need fallback.
const std::string kText =
    "Hello  world! I'm 12345 naïve 日本語 😀\t\n\n"
    "<|x|>[SEP] ab aba xy e\u0301 \u00a0\ufeff";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("tokenizer.json", data, size);
  std::unique_ptr<data::Tokenizer> tok;
  try {
    tok = data::load_tokenizer_json(path);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::data) std::abort();
    return 0;
  }
  try {
    const std::vector<int32_t> ids = tok->encode(kText);
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size()) std::abort();
    tok->decode(ids);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::data) std::abort();  // a pattern past PCRE2's match limit is the file's fault
  }
  return 0;
}
