// Note [your own text] in zt/data/user_text.h.
#include "zt/data/user_text.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "input_file.h"
#include "utf8.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::data {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kProgressBytes = uint64_t(64) << 20;  // a progress line per 64 MB read

std::string hex_byte(unsigned char c) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", c);
  return b;
}

// Text or a clear error: not empty, not compressed, no NUL, valid UTF-8.
void check_text(const std::string& name, std::string_view bytes) {
  ZT_CHECK_AS(ErrorKind::data, !bytes.empty(), "[prepare] ", name, " is empty: nothing to train on");
  const auto starts = [&](std::string_view magic) { return bytes.substr(0, magic.size()) == magic; };
  for (auto [magic, kind] :
       {std::pair{std::string_view("\x1f\x8b", 2), "gzip"}, std::pair{std::string_view("BZh"), "bzip2"},
        std::pair{std::string_view("\xfd"
                                   "7zXZ",
                                   5),
                  "xz"},
        std::pair{std::string_view("\x28\xb5\x2f\xfd", 4), "zstd"}})
    ZT_CHECK_AS(ErrorKind::data, !starts(magic), "[prepare] ", name, " is ", kind,
                "-compressed, not text: decompress it first");
  if (const size_t nul = bytes.find('\0'); nul != std::string_view::npos)
    ZT_THROW_AS(ErrorKind::data, "[prepare] ", name, " is binary, not text: a NUL byte at offset ", nul);
  if (const size_t bad = utf8::first_invalid(bytes); bad != std::string_view::npos)
    ZT_THROW_AS(ErrorKind::data, "[prepare] ", name, " is not UTF-8 text: byte ",
                hex_byte(static_cast<unsigned char>(bytes[bad])), " at offset ", bad,
                " (convert it, e.g. iconv -f latin1 -t utf-8)");
}

// nlohmann's message without its prefix ("[json.exception.parse_error.101] parse error at line 1,
// column 17: syntax error while parsing value - ") or its echo of the line ("; last read: '...'").
std::string json_error_text(const nlohmann::json::exception& e) {
  std::string s = e.what();
  if (s.starts_with("[json.exception.")) s.erase(0, std::min(s.size(), s.find("] ") + 2));
  if (s.starts_with("parse error")) s.erase(0, std::min(s.size(), s.find(": ") + 2));
  if (s.starts_with("syntax error")) s.erase(0, std::min(s.size(), s.find(" - ") + 3));
  if (const size_t echo = s.find("; last read: "); echo != std::string::npos)
    s.erase(echo, std::min(s.size(), s.find("; expected", echo)) - echo);
  return s;
}

std::vector<Document> parse_jsonl(const std::string& name, std::string_view bytes, const std::string& key) {
  std::vector<Document> out;
  size_t line_no = 0;
  for (size_t at = 0; at < bytes.size();) {
    const size_t end = std::min(bytes.find('\n', at), bytes.size());
    const std::string_view line = bytes.substr(at, end - at);
    ++line_no;
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::parse_error& e) {  // its byte counts from the line's start, from 1
        ZT_THROW_AS(ErrorKind::data, "[prepare] ", name, ": line ", line_no, " (byte offset ", at,
                    ") is not valid JSON: ", json_error_text(e), " at column ", e.byte);
      } catch (const nlohmann::json::exception& e) {  // a number past double's range
        ZT_THROW_AS(ErrorKind::data, "[prepare] ", name, ": line ", line_no, " (byte offset ", at,
                    ") is not valid JSON: ", json_error_text(e));
      }
      ZT_CHECK_AS(ErrorKind::data, j.is_object(), "[prepare] ", name, ": line ", line_no, " (byte offset ", at,
                  ") is not a JSON object");
      const auto it = j.find(key);
      ZT_CHECK_AS(ErrorKind::data, it != j.end() && it->is_string(), "[prepare] ", name, ": line ", line_no,
                  " (byte offset ", at, ") has no string field '", key, "' (--text-key names another)");
      std::string text = it->get<std::string>();
      if (!text.empty()) out.push_back({name + ":" + std::to_string(line_no), std::move(text)});
    }
    at = end + 1;
  }
  ZT_CHECK_AS(ErrorKind::data, !out.empty(), "[prepare] ", name, " has no non-empty '", key, "' field on any line");
  return out;
}

bool is_jsonl(const fs::path& p) { return p.extension() == ".jsonl"; }

bool hidden(const fs::path& p) {
  const std::string n = p.filename().string();
  return !n.empty() && n[0] == '.';
}

// Why stat() failed, as the system says it; a dangling link also names what it points to.
std::string stat_failure(const fs::path& p, int err) {
  std::string why = std::strerror(err);
  std::error_code ec;
  if (err == ENOENT && fs::is_symlink(fs::symlink_status(p, ec)))
    why += " (a symbolic link to '" + fs::read_symlink(p, ec).string() + "', which does not exist)";
  return why;
}

// Entries left out of the folders read, said in one line at the end: how many, and the first.
struct LeftOut {
  size_t count = 0;
  std::string first;
  void add(std::string why) {
    if (count++ == 0) first = std::move(why);
  }
};

// A file or folder whatever path reaches it (links resolved): (device, inode).
using FileId = std::pair<uint64_t, uint64_t>;

// Prepare's own output, never read as input (a second run over a folder holding --out would read
// the first run's manifest): the --out folder and its temporaries beside it ("<out>.tmp.*", Note
// [output folders]), known by canonical path, so no link or ".." reaches them.
class OwnOutput {
 public:
  explicit OwnOutput(std::string out) {
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    std::error_code ec;
    const fs::path c = out.empty() ? fs::path() : fs::weakly_canonical(fs::absolute(out, ec), ec);
    if (ec || !c.has_filename()) return;
    parent_ = c.parent_path();
    name_ = c.filename().string();
  }
  // Whether the existing path p is the output folder, one of its temporaries, or inside one.
  bool holds(const fs::path& p) const {
    std::error_code ec;
    const fs::path c = name_.empty() ? fs::path() : fs::canonical(p, ec);
    if (ec || c.empty()) return false;
    const fs::path rel = c.lexically_relative(parent_);
    const std::string first = rel.empty() ? std::string() : rel.begin()->string();
    return first == name_ || is_temp_name_of(first, name_);
  }

 private:
  fs::path parent_;
  std::string name_;  // empty: no output to keep out
};

// One read_text_inputs: what has been read, by identity, so that no file is read twice (the same
// --input twice, a folder and a file in it, a link beside its target), and what was left out.
struct Reading {
  explicit Reading(const std::string& out) : own(out) {}
  OwnOutput own;
  std::map<FileId, std::string> files, folders;  // the path each was first read by
  LeftOut not_text, folder_links, again, own_output;
};

// The regular files under a folder in path order, hidden names and everything under hidden folders
// left out. A folder or entry that cannot be read is an error with the system's reason (a permission,
// a dangling link); FIFOs, sockets and devices are left out, and links to folders not followed.
std::vector<fs::path> files_under(const fs::path& root, Reading& r) {
  std::vector<fs::path> out, pending{root};
  const size_t skipped = r.again.count + r.own_output.count;
  while (!pending.empty()) {
    const fs::path dir = std::move(pending.back());
    pending.pop_back();
    std::error_code ec;
    std::vector<fs::path> entries;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(it->path());
    ZT_CHECK_AS(ErrorKind::data, !ec, "[prepare] cannot read the folder ", dir.string(), ": ", ec.message());
    std::sort(entries.begin(), entries.end());
    const size_t walked = pending.size();
    for (const fs::path& e : entries) {
      if (hidden(e)) continue;
      struct stat st {};
      const bool listed = ::lstat(e.c_str(), &st) == 0, link = listed && S_ISLNK(st.st_mode);
      if ((!listed || link) && ::stat(e.c_str(), &st) != 0) {
        const int err = errno;
        ZT_THROW_AS(ErrorKind::data, "[prepare] cannot read ", e.string(), ": ", stat_failure(e, err));
      }
      if (S_ISDIR(st.st_mode)) {
        if (link) {
          r.folder_links.add(e.string());  // a link could lead anywhere, even above the folder
        } else if (r.own.holds(e)) {
          r.own_output.add(e.string());
        } else if (const auto [at, fresh] = r.folders.emplace(FileId{st.st_dev, st.st_ino}, e.string()); fresh) {
          pending.push_back(e);
        } else {
          r.again.add(e.string() + " is the folder " + at->second);
        }
      } else if (S_ISREG(st.st_mode)) {
        if (link && r.own.holds(e))
          r.own_output.add(e.string());
        else
          out.push_back(e);
      } else {
        r.not_text.add("[prepare] " + e.string() + " is " + file_type_name(st.st_mode) + ", not a regular file");
      }
    }
    std::reverse(pending.begin() + ptrdiff_t(walked), pending.end());  // the first subfolder is walked next
  }
  std::sort(out.begin(), out.end());
  ZT_CHECK_AS(ErrorKind::data, !out.empty() || r.again.count + r.own_output.count > skipped, "[prepare] the folder ",
              root.string(), " holds no files");
  return out;
}

}  // namespace

std::vector<Document> parse_text_input(const std::string& name, std::string_view bytes, bool jsonl,
                                       const std::string& text_key) {
  check_text(name, bytes);
  if (jsonl) return parse_jsonl(name, bytes, text_key);
  return {Document{name, std::string(bytes)}};
}

std::vector<Document> read_text_inputs(const std::vector<std::string>& paths, const std::string& text_key,
                                       const std::function<void(const std::string&)>& progress,
                                       const std::string& out_dir) {
  ZT_CHECK_AS(ErrorKind::config, !paths.empty(), "[prepare] no --input given");
  const auto note = [&](const std::string& line) {
    if (progress) progress(line);
  };
  std::vector<Document> out;
  uint64_t bytes = 0, next_report = kProgressBytes;
  size_t files = 0;
  Reading r(out_dir);
  for (const std::string& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      const int err = errno;
      std::error_code ec;
      ZT_CHECK_AS(ErrorKind::data, err != ENOENT || fs::is_symlink(fs::symlink_status(p, ec)), "[prepare] --input ", p,
                  " does not exist");
      ZT_THROW_AS(ErrorKind::data, "[prepare] --input ", p, ": cannot read it: ", stat_failure(p, err));
    }
    ZT_CHECK_AS(ErrorKind::data, !r.own.holds(p), "[prepare] --input ", p, " is prepare's own output (--out ", out_dir,
                ", or inside it): choose another --input or --out");
    const bool folder = S_ISDIR(st.st_mode);
    if (folder) {
      if (const auto [at, fresh] = r.folders.emplace(FileId{st.st_dev, st.st_ino}, p); !fresh) {
        note("--input " + p + " is the folder " + at->second + " again: read once");
        continue;
      }
    }
    for (const fs::path& f : folder ? files_under(p, r) : std::vector<fs::path>{fs::path(p)}) {
      // Unreadable is an error wherever it is; not text only where a folder holds it.
      detail::InputFile in(f.string());
      if (const auto [at, fresh] = r.files.emplace(FileId{in.device(), in.inode()}, f.string()); !fresh) {
        if (folder)
          r.again.add(f.string() + " is " + at->second);
        else
          note("--input " + p + " is " + at->second + " again: read once");
        continue;
      }
      std::string text(size_t(in.size()), '\0');
      in.read_at(text.data(), text.size(), 0);
      try {
        for (Document& d : parse_text_input(f.string(), text, is_jsonl(f), text_key)) out.push_back(std::move(d));
        bytes += text.size();
        ++files;
      } catch (const Error& e) {
        // A file named on its own must be text; a folder's other files (compressed, binary,
        // another encoding) are left out and counted, so a folder of documentation just works.
        if (!folder || e.kind() != ErrorKind::data) throw;
        r.not_text.add(e.what());
      }
      if (progress && bytes >= next_report) {
        progress("read " + std::to_string(files) + " files, " + std::to_string(bytes >> 20) + " MiB, " +
                 std::to_string(out.size()) + " documents");
        next_report = bytes + kProgressBytes;
      }
    }
  }
  ZT_CHECK_AS(ErrorKind::data, !out.empty(), "[prepare] no text in --input: ", r.not_text.count,
              " files left out, the first because ", r.not_text.first);
  note("input: " + std::to_string(files) + " files, " + std::to_string(out.size()) + " documents, " +
       std::to_string(bytes) + " bytes" +
       (r.not_text.count ? "; left out " + std::to_string(r.not_text.count) +
                               " files of folders that are not text, first: " + r.not_text.first
                         : std::string()));
  if (r.again.count)
    note("left out " + std::to_string(r.again.count) +
         " files or folders already read by another path (a link beside its target, a folder given again), first: " +
         r.again.first);
  if (r.own_output.count)
    note("left out " + std::to_string(r.own_output.count) + " paths of prepare's own output (--out " + out_dir +
         " and its temporaries are never read), first: " + r.own_output.first);
  if (r.folder_links.count)
    note("did not follow " + std::to_string(r.folder_links.count) +
         " symbolic links to folders (give one as --input to read it), first: " + r.folder_links.first);
  return out;
}

}  // namespace zt::data
