// tokenizer.json, Hugging Face tokenizers' format: byte-level BPE (GPT-2, Llama 3, Qwen2) and
// BERT's WordPiece, with the added tokens matched before the rest (Note [what tokenizer.json gives]).
#include <algorithm>
#include <array>
#include <unordered_map>

#include "byte_bpe.h"
#include "hf_json.h"
#include "utf8.h"
#include "vocab_file.h"
#include "wordpiece.h"
#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

// Note [what tokenizer.json gives]
// Read: model BPE (vocab, merges as "a b" or [a, b], ignore_merges) behind a ByteLevel
// pre-tokenizer (alone: GPT-2's pattern; or after Split{Regex} stages, behavior Isolated, as Llama
// 3 and Qwen2), normalizer none or NFC/NFD/NFKC/NFKD, decoder ByteLevel; model WordPiece
// (continuing_subword_prefix, unk_token, max_input_chars_per_word) with BertNormalizer and
// BertPreTokenizer, decoder WordPiece (tokens joined by spaces, continuations glued, without
// cleanup). As Hugging Face does, added_tokens are found in the text first (leftmost, then
// longest; lstrip/rstrip take the white space beside them) and the text between them goes through
// the pipeline; they are matched in the raw text even when `normalized` is true. The
// post_processor is not applied: encode adds no special tokens, as every Tokenizer. Anything else
// (Unigram, dropout, a Metaspace pre-tokenizer, single_word tokens) is an error naming the key.

namespace zt::data {
namespace {

using detail::JsonDoc;
using nlohmann::json;

constexpr int kMaxDepth = 16;  // tokenizer.json nests 5 deep; Sequences of Sequences a few more

struct Added {
  std::string content;
  int32_t id;
  bool lstrip, rstrip;
};

std::vector<Added> read_added(const json& root, const JsonDoc& d) {
  std::vector<Added> out;
  const json* arr = d.find(root, "added_tokens");
  if (!arr) return out;
  d.expect(arr->is_array(), "added_tokens", "an array of {id, content, ...}", *arr);
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string at = "added_tokens[" + std::to_string(i) + "]";
    const json& t = (*arr)[i];
    d.expect(t.is_object(), at, "an object {id, content, ...}", t);
    Added a{d.string(t, at, "content"), int32_t(d.integer(t, at, "id", 0, INT32_MAX - 1)),
            d.flag(t, at, "lstrip", false), d.flag(t, at, "rstrip", false)};
    d.expect(!a.content.empty(), at + ".content", "a non-empty string", JsonDoc::field(t, "content"));
    d.expect(!d.flag(t, at, "single_word", false), at + ".single_word", "false (single_word is not supported)",
             JsonDoc::field(t, "single_word"));
    out.push_back(std::move(a));
  }
  return out;
}

// model.vocab (token -> id) with the added tokens outside it: ids 0..n-1, each once.
struct Vocab {
  std::vector<std::string> tokens;
  std::vector<bool> decode_only;
};

Vocab read_vocab(const json& model, const std::vector<Added>& added, const JsonDoc& d) {
  const json& v = d.get(model, "model", "vocab", "an object of token -> id");
  d.expect(v.is_object() && !v.empty(), "model.vocab", "a non-empty object of token -> id", v);
  const size_t limit = v.size() + added.size();  // dense ids cannot reach past this
  Vocab out;
  out.tokens.resize(limit);
  std::vector<bool> have(limit);
  for (const auto& [token, value] : v.items()) {
    const std::string at = "model.vocab \"" + detail::clip_entry(token) + "\"";
    d.expect(value.is_number_integer(), at, "an integer id", value);
    const int64_t id = value.get<int64_t>();
    d.expect(id >= 0 && id < int64_t(limit), at, "an id in [0, " + std::to_string(limit) + ") (ids count from 0)",
             value);
    d.expect(!have[id], at, "an id no other token has", value);
    have[id] = true;
    out.tokens[id] = token;
  }
  out.decode_only.assign(limit, false);
  for (size_t i = 0; i < added.size(); ++i) {
    const int32_t id = added[i].id;
    d.expect(size_t(id) < limit, "added_tokens[" + std::to_string(i) + "].id",
             "an id in [0, " + std::to_string(limit) + ")", json(id));
    if (have[id]) continue;  // in the model too (GPT-2's <|endoftext|>)
    have[id] = out.decode_only[id] = true;
    out.tokens[id] = added[i].content;
  }
  size_t n = limit;
  while (n > 0 && !have[n - 1]) --n;
  const auto hole = std::find(have.begin(), have.begin() + n, false);
  if (hole != have.begin() + n)
    d.fail("model.vocab", "no token (in model.vocab or added_tokens) has id " + std::to_string(hole - have.begin()) +
                              ", below the largest id " + std::to_string(n - 1));
  out.tokens.resize(n);
  out.decode_only.resize(n);
  return out;
}

// Split's pattern: {"Regex": ...} as is, {"String": ...} matched literally.
std::string split_pattern(const json& stage, const std::string& at, const JsonDoc& d) {
  const json& p = d.get(stage, at, "pattern", "{\"Regex\": ...} or {\"String\": ...}");
  if (p.is_object() && p.size() == 1 && p.begin().value().is_string()) {
    const std::string& s = p.begin().value().get_ref<const std::string&>();
    if (p.contains("Regex")) return s;
    if (p.contains("String")) {
      std::string quoted;
      for (char c : s) {
        if (!std::isalnum(uint8_t(c)) && uint8_t(c) < 0x80) quoted += '\\';
        quoted += c;
      }
      return quoted;
    }
  }
  d.fail(at + ".pattern", "{\"Regex\": \"...\"} or {\"String\": \"...\"}", p);
}

// The pre-tokenizer of a byte-level BPE: Split stages, then ByteLevel last.
void read_pre(const json& pre, const std::string& at, const JsonDoc& d, std::vector<detail::RegexSplit>& splits,
              detail::ByteBpeOptions& opt, bool& byte_level) {
  const std::string type = d.string(pre, at, "type");
  d.expect(!byte_level, at, "nothing after the ByteLevel pre-tokenizer (it must come last)", pre);
  if (type == "Sequence") {
    const json& list = d.get(pre, at, "pretokenizers", "an array of pre-tokenizers");
    d.expect(list.is_array(), at + ".pretokenizers", "an array of pre-tokenizers", list);
    for (size_t i = 0; i < list.size(); ++i)
      read_pre(list[i], at + ".pretokenizers[" + std::to_string(i) + "]", d, splits, opt, byte_level);
  } else if (type == "Split") {
    const std::string pattern = split_pattern(pre, at, d);
    const std::string behavior = d.string(pre, at, "behavior");
    d.expect(behavior == "Isolated", at + ".behavior", "\"Isolated\" (the only one supported)",
             JsonDoc::field(pre, "behavior"));
    d.expect(!d.flag(pre, at, "invert", false), at + ".invert", "false", JsonDoc::field(pre, "invert"));
    splits.emplace_back(pattern, "[tokenizer] " + d.path() + ": " + at + ".pattern:", ErrorKind::data);
  } else if (type == "ByteLevel") {
    byte_level = true;
    opt.add_prefix_space = d.flag(pre, at, "add_prefix_space", true);
    opt.prefix_level = splits.size();
    if (d.flag(pre, at, "use_regex", true))
      splits.emplace_back(detail::gpt2_pattern(), "[tokenizer] " + d.path() + ":", ErrorKind::internal);
  } else {
    d.fail(at + ".type", "\"ByteLevel\", \"Split\" or \"Sequence\" (a byte-level BPE)", JsonDoc::field(pre, "type"));
  }
}

std::unique_ptr<Tokenizer> load_bpe(const json& root, const json& model, const std::vector<Added>& added,
                                    const JsonDoc& d) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = d.find(model, key);
    d.expect(!v || (v->is_string() && v->empty()), std::string("model.") + key, "null (not supported)",
             v ? *v : json());
  }
  const json* dropout = d.find(model, "dropout");
  d.expect(!dropout || (dropout->is_number() && dropout->get<double>() == 0), "model.dropout", "null (not supported)",
           dropout ? *dropout : json());
  detail::ByteBpeOptions opt;
  opt.name = "tokenizer.json";
  opt.who = "[tokenizer] " + d.path() + ":";
  opt.order = detail::MergeOrder::one_at_a_time;
  opt.ignore_merges = d.flag(model, "model", "ignore_merges", false);

  if (const json* norm = d.find(root, "normalizer")) {
    const std::string type = d.string(*norm, "normalizer", "type");
    using N = detail::ByteBpeOptions::Normal;
    const std::array<std::pair<const char*, N>, 4> kinds = {
        {{"NFC", N::nfc}, {"NFD", N::nfd}, {"NFKC", N::nfkc}, {"NFKD", N::nfkd}}};
    const auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return type == k.first; });
    d.expect(it != kinds.end(), "normalizer.type", "null, \"NFC\", \"NFD\", \"NFKC\" or \"NFKD\" for a BPE",
             JsonDoc::field(*norm, "type"));
    opt.normal = it->second;
  }
  std::vector<detail::RegexSplit> splits;
  bool byte_level = false;
  read_pre(d.get(root, "", "pre_tokenizer", "a ByteLevel pre-tokenizer"), "pre_tokenizer", d, splits, opt, byte_level);
  d.expect(byte_level, "pre_tokenizer", "a ByteLevel pre-tokenizer last (only byte-level BPE is supported)",
           JsonDoc::field(root, "pre_tokenizer"));
  if (const json* dec = d.find(root, "decoder"))
    d.expect(d.string(*dec, "decoder", "type") == "ByteLevel", "decoder.type", "\"ByteLevel\"",
             JsonDoc::field(*dec, "type"));

  Vocab v = read_vocab(model, added, d);
  detail::BpeVocab bv;
  bv.bytes.resize(v.tokens.size());
  std::unordered_map<std::string_view, int32_t> ids;  // byte-level token -> id
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (v.decode_only[id]) {
      bv.bytes[id] = v.tokens[id];  // an added token stands for its own text
      continue;
    }
    char32_t bad = 0;
    const std::string& t = v.tokens[id];
    if (!detail::byte_level_bytes(t, bv.bytes[id], bad))
      d.fail("model.vocab \"" + detail::clip_entry(t) + "\"",
             "byte-level characters only (U+" + detail::hex(uint32_t(bad)) + " is not one)");
    ids.emplace(t, int32_t(id));
  }
  bv.decode_only = v.decode_only;
  detail::BpeModel bpe(std::move(bv));
  if (const int b = bpe.missing_byte(); b >= 0) {
    std::string c;
    utf8::append(c, detail::byte_chars()[b]);
    d.fail("model.vocab", "a token for every byte (none is \"" + c + "\", byte " + std::to_string(b) + ")");
  }
  const json& merges = d.get(model, "model", "merges", "an array of merges");
  d.expect(merges.is_array(), "model.merges", "an array of \"a b\" or [\"a\", \"b\"]", merges);
  const auto id_of = [&](const std::string& t, const std::string& at) {
    const auto it = ids.find(t);
    if (it == ids.end()) d.fail(at, "tokens of model.vocab (\"" + detail::clip_entry(t) + "\" is not one)");
    return it->second;
  };
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string at = "model.merges[" + std::to_string(i) + "]";
    const json& m = merges[i];
    std::string a, b;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      d.expect(sp != std::string::npos && sp > 0 && sp + 1 < s.size() && s.find(' ', sp + 1) == std::string::npos, at,
               "\"a b\": two tokens and one space", m);
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else {
      d.expect(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), at, "\"a b\" or [\"a\", \"b\"]",
               m);
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    }
    const int32_t left = id_of(a, at), right = id_of(b, at);  // in this order: the error names the first unknown
    bpe.add_merge(left, right, id_of(a + b, at), int32_t(i));
  }
  return detail::make_byte_bpe(std::move(bpe), std::move(splits), std::move(opt));
}

std::unique_ptr<Tokenizer> load_wordpiece(const json& root, const json& model, const std::vector<Added>& added,
                                          const JsonDoc& d) {
  detail::WordPieceOptions opt;
  opt.name = "tokenizer.json";
  opt.who = "[tokenizer] " + d.path() + ":";
  opt.where = d.path();
  opt.prefix = d.string(model, "model", "continuing_subword_prefix", "##");
  opt.unk = d.string(model, "model", "unk_token", "[UNK]");
  opt.max_word_chars = size_t(d.integer(model, "model", "max_input_chars_per_word", 1, INT32_MAX, 100));
  const json* norm = d.find(root, "normalizer");
  if (!norm) {
    opt.clean_text = opt.chinese_chars = opt.lowercase = opt.strip_accents = false;
  } else {
    const std::string type = d.string(*norm, "normalizer", "type");
    d.expect(type == "BertNormalizer", "normalizer.type", "null or \"BertNormalizer\" for a WordPiece",
             JsonDoc::field(*norm, "type"));
    opt.clean_text = d.flag(*norm, "normalizer", "clean_text", true);
    opt.chinese_chars = d.flag(*norm, "normalizer", "handle_chinese_chars", true);
    opt.lowercase = d.flag(*norm, "normalizer", "lowercase", true);
    opt.strip_accents = d.flag(*norm, "normalizer", "strip_accents", opt.lowercase);  // null follows lowercase
  }
  const json& pre = d.get(root, "", "pre_tokenizer", "a BertPreTokenizer");
  d.expect(d.string(pre, "pre_tokenizer", "type") == "BertPreTokenizer", "pre_tokenizer.type",
           "\"BertPreTokenizer\" for a WordPiece", JsonDoc::field(pre, "type"));
  if (const json* dec = d.find(root, "decoder"))
    d.expect(d.string(*dec, "decoder", "type") == "WordPiece", "decoder.type", "\"WordPiece\"",
             JsonDoc::field(*dec, "type"));
  Vocab v = read_vocab(model, added, d);
  opt.tokens = std::move(v.tokens);
  opt.decode_only = std::move(v.decode_only);
  return detail::make_wordpiece(std::move(opt));
}

// Added tokens found first, the text between them given to the model's pipeline.
class JsonTokenizer final : public Tokenizer {
 public:
  JsonTokenizer(std::unique_ptr<Tokenizer> inner, std::vector<Added> added, std::string who)
      : inner_(std::move(inner)), added_(std::move(added)), who_(std::move(who)) {
    std::stable_sort(added_.begin(), added_.end(),
                     [](const Added& a, const Added& b) { return a.content.size() > b.content.size(); });
    for (size_t i = 0; i < added_.size(); ++i) {
      by_first_[uint8_t(added_[i].content[0])].push_back(uint32_t(i));  // longest first
      by_content_.emplace(added_[i].content, added_[i].id);
    }
  }

  const char* name() const override { return "tokenizer.json"; }
  int32_t vocab_size() const override { return inner_->vocab_size(); }
  std::string decode(const std::vector<int32_t>& ids) const override { return inner_->decode(ids); }

  int32_t special(std::string_view token) const override {
    const auto it = by_content_.find(std::string(token));
    return it != by_content_.end() ? it->second : inner_->special(token);
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    utf8::check(text, who_.c_str());
    std::vector<int32_t> out;
    const auto model = [&](std::string_view s) {
      if (s.empty()) return;
      const std::vector<int32_t> ids = inner_->encode(s);
      out.insert(out.end(), ids.begin(), ids.end());
    };
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    size_t seg = 0;  // where the text not yet given to the model starts
    for (size_t i = 0; i < text.size(); ++i) {
      const Added* hit = nullptr;
      for (uint32_t k : by_first_[uint8_t(text[i])])
        if (text.substr(i).starts_with(added_[k].content)) {
          hit = &added_[k];
          break;
        }
      if (!hit) continue;
      size_t b = i, e = i + hit->content.size();
      while (hit->lstrip && b > seg && space(text[b - 1])) --b;
      while (hit->rstrip && e < text.size() && space(text[e])) ++e;
      model(text.substr(seg, b - seg));
      out.push_back(hit->id);
      seg = e;
      i = e - 1;
    }
    model(text.substr(seg));
    return out;
  }

 private:
  std::unique_ptr<Tokenizer> inner_;
  std::vector<Added> added_;
  std::array<std::vector<uint32_t>, 256> by_first_;  // added_ indices by first byte, longest first
  std::unordered_map<std::string, int32_t> by_content_;
  std::string who_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  const JsonDoc d(path);
  const json root = detail::parse_json(detail::read_vocab_file(path), path, kMaxDepth);
  d.expect(root.is_object(), "the top level", "an object", root);
  const json& model = d.get(root, "", "model", "an object with type, vocab, ...");
  d.expect(model.is_object(), "model", "an object with type, vocab, ...", model);
  std::vector<Added> added = read_added(root, d);
  const std::string type = d.string(model, "model", "type");
  std::unique_ptr<Tokenizer> inner;
  if (type == "BPE") {
    inner = load_bpe(root, model, added, d);
  } else if (type == "WordPiece") {
    inner = load_wordpiece(root, model, added, d);
  } else {
    d.fail("model.type", "\"BPE\" or \"WordPiece\" (Unigram and WordLevel are not supported)",
           JsonDoc::field(model, "type"));
  }
  return std::make_unique<JsonTokenizer>(std::move(inner), std::move(added), "[tokenizer] " + path + ":");
}

}  // namespace zt::data
