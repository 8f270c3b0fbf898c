// `zerotrain tokenize`: the ids of stdin's text as JSON, all of it as one text or line by line.
#include <algorithm>
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

}  // namespace

int run_tokenize(const TokenizeOptions& opt) {
  const std::string dir = opt.dir.empty() ? "data/" + opt.tokenizer : opt.dir;
  const auto tok = data::load_tokenizer(opt.tokenizer, dir);
  const std::string text = read_stdin();
  std::string out;
  if (!opt.lines) {
    append_json(out, tok->encode(text));
  } else {
    // A line ends at '\n' (not part of it); a last line without one counts, an empty end does not.
    size_t line = 1;
    for (size_t start = 0; start < text.size(); ++line) {
      const size_t end = std::min(text.find('\n', start), text.size());
      try {
        append_json(out, tok->encode(std::string_view(text).substr(start, end - start)));
      } catch (const Error& e) {
        throw Error("[tokenize] standard input line " + std::to_string(line) + ": " + e.what(), e.kind());
      }
      start = end + 1;
    }
  }
  ZT_CHECK_AS(ErrorKind::data, std::fwrite(out.data(), 1, out.size(), stdout) == out.size() && std::fflush(stdout) == 0,
              "[tokenize] cannot write standard output");
  return 0;
}

}  // namespace zt::apps
