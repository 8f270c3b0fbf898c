// SentencePiece .model files through Debian's libsentencepiece (0.1.97): its own encoder, so the
// ids are spm_encode's by construction; the test checks that against spm_encode itself.
#include <sentencepiece_processor.h>

#include "utf8.h"
#include "vocab_file.h"
#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

namespace zt::data {
namespace {

class SentencePiece final : public Tokenizer {
 public:
  explicit SentencePiece(const std::string& path) : who_("[tokenizer] " + path + ":") {
    const std::string bytes = detail::read_vocab_file(path);  // the library's own message names no file
    const auto st = sp_.LoadFromSerializedProto(bytes);
    ZT_CHECK_AS(ErrorKind::data, st.ok(), "[tokenizer] ", path,
                ": not a SentencePiece model (libsentencepiece: ", st.ToString(), ")");
    ZT_CHECK_AS(ErrorKind::data, sp_.GetPieceSize() > 0, "[tokenizer] ", path, ": the model has no pieces");
  }

  const char* name() const override { return "sentencepiece"; }
  int32_t vocab_size() const override { return sp_.GetPieceSize(); }

  // <s>, </s>, <unk> and the other control pieces by their text, and user-defined ones as <...>
  // (0.1.97 cannot ask for the user-defined type).
  int32_t special(std::string_view token) const override {
    const int id = sp_.PieceToId(token);
    if (id < 0 || id >= sp_.GetPieceSize() || sp_.IdToPiece(id) != token) return -1;
    const bool bracketed = token.size() > 2 && token.front() == '<' && token.back() == '>' && !sp_.IsByte(id);
    return sp_.IsControl(id) || sp_.IsUnknown(id) || bracketed ? id : -1;
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    utf8::check(text, who_.c_str());
    std::vector<int> ids;
    const auto st = sp_.Encode(text, &ids);
    ZT_CHECK_AS(ErrorKind::data, st.ok(), who_, " cannot encode: ", st.ToString());
    return {ids.begin(), ids.end()};
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    check_ids(ids, who_.c_str());
    std::string out;
    const auto st = sp_.Decode(std::vector<int>(ids.begin(), ids.end()), &out);
    ZT_CHECK_AS(ErrorKind::data, st.ok(), who_, " cannot decode: ", st.ToString());
    return out;
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
  std::string who_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path) { return std::make_unique<SentencePiece>(path); }

}  // namespace zt::data
