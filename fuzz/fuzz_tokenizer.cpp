// Arbitrary bytes as text for both tokenizers (the real vocabularies when scripts/setup.sh has
// fetched them, else small ones made here). Invalid UTF-8 must be a data error; valid text
// must encode to ids inside the vocabulary, and GPT-2's decode must give the bytes back.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

using namespace zt;

namespace {

// The data folder's files ($ZT_FUZZ_DATA_DIR, else the repository's data/), or a few-token
// vocabulary in the scratch folder.
std::string tokenizer_dir(const std::string& kind) {
  const char* env = std::getenv("ZT_FUZZ_DATA_DIR");
  const std::string real = std::string(env && *env ? env : ZT_FUZZ_DATA_DIR) + "/" + kind;
  if (std::filesystem::exists(real + (kind == "gpt2" ? "/encoder.json" : "/vocab.json"))) return real;
  const std::string dir = fuzz::scratch_dir() + "/" + kind;
  std::filesystem::create_directories(dir);
  if (kind == "bert") {
    std::ofstream(dir + "/vocab.json")
        << R"(["[PAD]","[UNK]","[CLS]","[SEP]","[MASK]","▁un","aff","able","▁a","a","▁,","▁é","é"])";
    return dir;
  }
  // bytes_to_unicode: printable bytes are themselves, the others U+0100 on, in byte order.
  std::string enc = "{";
  for (int b = 0, next = 256; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const int cp = printable ? b : next++;
    std::string key = cp == '"' || cp == '\\' ? std::string("\\") + char(cp) : "";
    if (key.empty() && cp < 0x80) key = std::string(1, char(cp));
    if (key.empty()) key = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    enc += "\"" + key + "\":" + std::to_string(b) + ",";
  }
  enc += R"("ab":256,"aba":257,"<|endoftext|>":258})";
  std::ofstream(dir + "/encoder.json") << enc;
  std::ofstream(dir + "/vocab.bpe") << "#version: 0.2\nab a\na b\n";
  return dir;
}

void check(const data::Tokenizer& tok, const std::string& text, bool round_trips) {
  try {
    const std::vector<int32_t> ids = tok.encode(text);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    const std::string back = tok.decode(ids);
    if (round_trips && back != text) std::abort();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::data) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto gpt2 = data::load_gpt2_tokenizer(tokenizer_dir("gpt2"));
  static const auto bert = data::load_bert_tokenizer(tokenizer_dir("bert"));
  const std::string text(reinterpret_cast<const char*>(data), size);
  check(*gpt2, text, /*round_trips=*/true);
  check(*bert, text, /*round_trips=*/false);
  return 0;
}
