// `zerotrain tokenize`: the ids of stdin's text as JSON, all of it as one text or line by line;
// --decode: the text of stdin's ids.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>

#include "commands.h"
#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

namespace zt::apps {

namespace {

std::string read_stdin() {
  std::string text;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) text.append(buf, n);
  ZT_CHECK_AS(ErrorKind::data, !std::ferror(stdin), "[tokenize] cannot read standard input");
  return text;
}

void append_json(std::string& out, const std::vector<int32_t>& ids) {
  out += '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  out += "]\n";
}

// Ids separated by white space or commas; JSON's brackets separate too, so both "1 2 3" and
// tokenize's own output ("[1,2,3]") read back. `who` starts the errors.
std::vector<int32_t> parse_ids(std::string_view s, const char* who) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < s.size();) {
    if (std::string_view(" \t\r\n\v\f,[]").find(s[i]) != std::string_view::npos) {
      ++i;
      continue;
    }
    int32_t id = 0;
    const auto [end, ec] = std::from_chars(s.data() + i, s.data() + s.size(), id);
    const size_t stop = std::min(s.size(), s.find_first_of(" \t\r\n\v\f,[]", i));
    ZT_CHECK_AS(ErrorKind::data, ec == std::errc() && size_t(end - s.data()) == stop, who, "'",
                s.substr(i, std::min<size_t>(stop - i, 40)), "' at byte offset ", i, " is not a token id");
    ids.push_back(id);
    i = stop;
  }
  return ids;
}

// A line ends at '\n' (not part of it); a last line without one counts, an empty end does not.
template <typename F>
void for_lines(const std::string& text, F&& f) {
  size_t line = 1;
  for (size_t start = 0; start < text.size(); ++line) {
    const size_t end = std::min(text.find('\n', start), text.size());
    try {
      f(std::string_view(text).substr(start, end - start), line);
    } catch (const Error& e) {
      throw Error("[tokenize] standard input line " + std::to_string(line) + ": " + e.what(), e.kind());
    }
    start = end + 1;
  }
}

std::string decode(const data::Tokenizer& tok, const TokenizeOptions& opt, const std::string& text) {
  if (!opt.lines) return tok.decode(parse_ids(text, "[tokenize] standard input: "));
  std::string out;
  for_lines(text, [&](std::string_view line, size_t) {
    out += tok.decode(parse_ids(line, ""));  // for_lines names the line
    out += '\n';
  });
  return out;
}

std::unique_ptr<data::Tokenizer> load(const TokenizeOptions& opt) {
  if (opt.dir.empty()) return data::load_tokenizer_spec(opt.tokenizer, "data");
  ZT_CHECK_AS(ErrorKind::invalid_argument, opt.tokenizer == "gpt2" || opt.tokenizer == "bert",
              "[tokenize] --dir is for --tokenizer gpt2 or bert; give the tokenizer.json, .model or folder itself "
              "as --tokenizer");
  return data::load_tokenizer(opt.tokenizer, opt.dir);
}

}  // namespace

int run_tokenize(const TokenizeOptions& opt) {
  const auto tok = load(opt);
  const std::string text = read_stdin();
  std::string out;
  if (opt.decode) {
    out = decode(*tok, opt, text);
  } else if (!opt.lines) {
    append_json(out, tok->encode(text));
  } else {
    for_lines(text, [&](std::string_view line, size_t) { append_json(out, tok->encode(line)); });
  }
  ZT_CHECK_AS(ErrorKind::data, std::fwrite(out.data(), 1, out.size(), stdout) == out.size() && std::fflush(stdout) == 0,
              "[tokenize] cannot write standard output");
  return 0;
}

}  // namespace zt::apps
