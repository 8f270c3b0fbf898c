// Note [your own text]: prepare --input on files, folders and JSON lines, the split by document,
// and every hostile input one data error naming the file and the byte offset.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "fake_tokenizer.h"
#include "zt/data/prepare.h"
#include "zt/data/token_shard.h"
#include "zt/data/user_text.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;

class UserText : public testing_util::TempDirTest {
 protected:
  PrepareLmReport prepare(std::vector<std::string> inputs, double val_fraction = 0.25, std::string key = "text") {
    PrepareLmOptions o;
    o.inputs = std::move(inputs);
    o.text_key = std::move(key);
    o.out = path("out");
    o.val_fraction = val_fraction;
    return prepare_lm(o, tok_);
  }
  std::vector<std::string> lines_of(const std::vector<std::string>& inputs) {
    std::vector<std::string> lines;
    read_text_inputs(inputs, "text", [&](const std::string& l) { lines.push_back(l); });
    return lines;
  }
  testing::ByteTokenizer tok_;
};

// A socket bound at `path`, or false where this system cannot make one there.
bool make_socket(const std::string& path) {
  sockaddr_un a{};
  if (path.size() >= sizeof a.sun_path) return false;
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

TEST_F(UserText, FoldersAreReadRecursivelyInPathOrderAndSplitByDocument) {
  fs::create_directories(path("in/b"));
  fs::create_directories(path("in/.git"));
  for (int i = 0; i < 6; ++i)
    write("in/" + std::string(i < 3 ? "a" : "b/") + std::to_string(i) + ".txt", "doc " + std::to_string(i));
  write("in/.hidden.txt", "never read");
  write("in/.git/config", "never read");
  const PrepareLmReport r = prepare({path("in")});  // k = 4: the fourth document is held out
  EXPECT_EQ(r.train_documents, 5);
  EXPECT_EQ(r.val_documents, 1);
  ASSERT_EQ(r.val_names.size(), 1u);
  EXPECT_EQ(r.val_names[0], path("in/b/3.txt"));
  const nlohmann::json m = nlohmann::json::parse(std::ifstream(path("out/manifest.json")));
  EXPECT_EQ(m["sources"]["inputs"][0], path("in"));
  EXPECT_EQ(m["inputs"].size(), 6u);
  EXPECT_EQ(m["inputs"][0]["document"], path("in/a0.txt"));
}

TEST_F(UserText, FewerDocumentsThanKHoldOutTheLastAndALoneOneIsSplitAtAParagraph) {
  write("one.txt", "first\n\nsecond");
  write("two.txt", "third");
  PrepareLmReport r = prepare({path("one.txt"), path("two.txt")}, 0.1);  // k = 10 > 2 documents
  EXPECT_EQ(r.val_names, std::vector<std::string>{path("two.txt")});
  const std::string book = "Chapter one.\n\nIt begins.\n\nChapter two.\n\nIt ends here.";
  write("book.txt", book);
  r = prepare({path("book.txt")}, 0.3);
  EXPECT_EQ(r.val_names, std::vector<std::string>{path("book.txt") + "#val"});
  EXPECT_EQ(r.train_documents, 1);
  const auto train = read_token_shard(path("out/train_000000.bin")), val = read_token_shard(path("out/val_000000.bin"));
  EXPECT_EQ(train.size() + val.size(), book.size() + 2);  // every byte once, and two separators
}

TEST_F(UserText, JsonLinesGiveOneDocumentPerLineFromTheChosenField) {
  write("posts.jsonl",
        "{\"body\": \"one\"}\n\n{\"body\": \"two\", \"id\": 2}\n{\"body\": \"\"}\n{\"body\": \"three\"}\n"
        "{\"body\": \"four\"}\n");
  const std::vector<Document> d =
      parse_text_input("posts.jsonl", std::string("{\"body\": \"one\"}\n\n{\"body\": \"two\"}\n"), true, "body");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].name, "posts.jsonl:3");
  EXPECT_EQ(d[1].text, "two");
  const PrepareLmReport r = prepare({path("posts.jsonl")}, 0.25, "body");  // empty texts are skipped
  EXPECT_EQ(r.train_documents + r.val_documents, 4);
  EXPECT_EQ(r.val_names, std::vector<std::string>{path("posts.jsonl") + ":6"});
}

// A line that is not JSON says the parser's reason and column; valid JSON that is no object says that.
TEST_F(UserText, AJsonLineThatIsNotJsonSaysWhyAndWhere) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\": \"a\"}\n{\"text\": \"\\ud800\"}\n",
       "s.jsonl: line 2 (byte offset 14) is not valid JSON: invalid string: surrogate U+D800..U+DBFF must be followed "
       "by U+DC00..U+DFFF at column 17"},
      {"{\"text\": \"a\"",
       "s.jsonl: line 1 (byte offset 0) is not valid JSON: unexpected end of input; expected '}' at column 13"},
      {"{\"text\": 1e999}", "s.jsonl: line 1 (byte offset 0) is not valid JSON: number overflow parsing '1e999'"},
      {"\n[\"text\", \"a\"]\n", "s.jsonl: line 2 (byte offset 1) is not a JSON object"},
      {"\"text\"", "s.jsonl: line 1 (byte offset 0) is not a JSON object"},
  };
  for (const auto& [bytes, says] : cases) {
    EXPECT_EQ(error_kind_of([&] { parse_text_input("s.jsonl", bytes, true); }), ErrorKind::data) << bytes;
    EXPECT_EQ(error_of([&] { parse_text_input("s.jsonl", bytes, true); }), "[prepare] " + says) << bytes;
  }
}

TEST_F(UserText, EveryHostileInputIsOneDataErrorNamingTheFileAndOffset) {
  struct Case {
    std::string name, bytes, says;
  };
  const std::vector<Case> cases = {
      {"empty.txt", "", "empty.txt is empty"},
      {"gz.txt", std::string("\x1f\x8b\x08\x00rest", 8), "gz.txt is gzip-compressed, not text: decompress it first"},
      {"bin.txt", std::string("abc\0def", 7), "bin.txt is binary, not text: a NUL byte at offset 3"},
      {"latin1.txt", "caf\xe9 au lait", "latin1.txt is not UTF-8 text: byte 0xe9 at offset 3"},
      {"x.jsonl", "{\"text\": \"a\"}\nnot json\n",
       "x.jsonl: line 2 (byte offset 14) is not valid JSON: invalid literal"},
      {"y.jsonl", "{\"text\": 5}\n", "y.jsonl: line 1 (byte offset 0) has no string field 'text'"},
      {"z.jsonl", "\n  \n", "z.jsonl has no non-empty 'text' field on any line"},
  };
  for (const Case& c : cases) {
    write(c.name, c.bytes);
    EXPECT_EQ(error_kind_of([&] { prepare({path(c.name)}); }), ErrorKind::data) << c.name;
    EXPECT_THAT(error_of([&] { prepare({path(c.name)}); }), HasSubstr(c.says)) << c.name;
    EXPECT_FALSE(fs::exists(path("out"))) << "a failed prepare leaves no output: " << c.name;
  }
  // Inside a folder such files are left out (and counted), the text in it is read.
  fs::create_directories(path("mixed"));
  write("mixed/a.txt", "some text");
  write("mixed/b.txt.gz", std::string("\x1f\x8b\x08\x00", 4));
  write("mixed/c.txt", "more text");
  std::vector<std::string> lines;
  const std::vector<Document> d =
      read_text_inputs({path("mixed")}, "text", [&](const std::string& l) { lines.push_back(l); });
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].text, "more text");
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.back(), HasSubstr("left out 1 files of folders that are not text, first: [prepare] " +
                                      path("mixed/b.txt.gz") + " is gzip-compressed"));
  fs::create_directories(path("none/.only_hidden"));
  EXPECT_THAT(error_of([&] { prepare({path("none")}); }), HasSubstr("holds no files"));
  EXPECT_THAT(error_of([&] { prepare({path("missing")}); }), HasSubstr("missing does not exist"));
}

// Issue 53 case 6: a file reached twice (named twice, a folder given again or by a link, a link
// beside its target) is read once and said, so it can never land in both train and validation.
TEST_F(UserText, EachFileIsReadOnceWhateverPathsReachIt) {
  write("a.txt", "the first document");
  write("b.txt", "the second document");
  const PrepareLmReport r = prepare({path("a.txt"), path("a.txt"), path("b.txt")}, 0.5);  // k = 2
  EXPECT_EQ(r.train_documents, 1);
  EXPECT_EQ(r.val_names, std::vector<std::string>{path("b.txt")});

  fs::create_directories(path("in/sub"));
  for (int i = 0; i < 5; ++i) write("in/sub/" + std::to_string(i) + ".txt", "doc " + std::to_string(i));
  fs::create_symlink(path("in/sub/0.txt"), path("in/zlink.txt"));
  fs::create_symlink(path("in"), path("in_link"));
  std::vector<std::string> lines;
  const std::vector<Document> d =
      read_text_inputs({path("a.txt"), path("in"), path("in/../a.txt"), path("in_link"), path("in/sub")}, "text",
                       [&](const std::string& l) { lines.push_back(l); });
  ASSERT_EQ(d.size(), 6u);
  std::set<std::string> texts;
  for (const Document& doc : d) texts.insert(doc.text);
  EXPECT_EQ(texts.size(), 6u);
  EXPECT_THAT(lines,
              ::testing::Contains("--input " + path("in/../a.txt") + " is " + path("a.txt") + " again: read once"));
  EXPECT_THAT(lines,
              ::testing::Contains("--input " + path("in_link") + " is the folder " + path("in") + " again: read once"));
  EXPECT_THAT(lines, ::testing::Contains("--input " + path("in/sub") + " is the folder " + path("in/sub") +
                                         " again: read once"));
  EXPECT_THAT(lines, ::testing::Contains("left out 1 files or folders already read by another path (a link beside "
                                         "its target, a folder given again), first: " +
                                         path("in/zlink.txt") + " is " + path("in/sub/0.txt")));
}

// Issue 53 case 7: prepare over a folder that holds its --out, run twice, reads the same documents
// both times: never its own output (the manifest, the shards) nor a temporary of it.
TEST_F(UserText, PreparesOwnOutputIsNeverReadAsInput) {
  fs::create_directories(path("in"));
  for (int i = 0; i < 8; ++i) write("in/" + std::to_string(i) + ".txt", "doc " + std::to_string(i));
  PrepareLmOptions o;
  o.inputs = {path("in")};
  o.out = path("in/tokens");
  o.val_fraction = 0.25;
  const PrepareLmReport first = prepare_lm(o, tok_);
  fs::create_directories(path("in/tokens.tmp.1.0123456789abcdef"));  // another run's, or one interrupted
  write("in/tokens.tmp.1.0123456789abcdef/manifest.json", "{\"text\": \"a temporary\"}");
  fs::create_symlink(path("in/tokens/manifest.json"), path("in/z_manifest.json"));
  std::vector<std::string> lines;
  const PrepareLmReport second = prepare_lm(o, tok_, [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(second.train_documents, first.train_documents);
  EXPECT_EQ(second.val_names, first.val_names);
  const nlohmann::json m = nlohmann::json::parse(std::ifstream(path("in/tokens/manifest.json")));
  EXPECT_EQ(m["inputs"].size(), 8u) << m["inputs"].dump();
  EXPECT_THAT(lines, ::testing::Contains(HasSubstr("paths of prepare's own output (--out " + path("in/tokens") +
                                                   " and its temporaries are never read), first: ")));
  o.inputs = {path("in/tokens")};
  EXPECT_EQ(error_of([&] { prepare_lm(o, tok_); }), "[prepare] --input " + path("in/tokens") +
                                                        " is prepare's own output (--out " + path("in/tokens") +
                                                        ", or inside it): choose another --input or --out");
  o.inputs = {path("in/z_manifest.json")};
  EXPECT_THAT(error_of([&] { prepare_lm(o, tok_); }), HasSubstr(" is prepare's own output"));
}

// What a folder holds that cannot be read is an error naming it and the system's reason, as root
// too (a dangling link, a link loop); FIFOs and sockets are left out and said; links to folders are
// not followed, and said.
TEST_F(UserText, WhatAFolderHoldsThatCannotBeReadIsAnErrorNamingItAndWhy) {
  fs::create_directories(path("in/sub"));
  for (int i = 0; i < 4; ++i) write("in/sub/" + std::to_string(i) + ".txt", "doc " + std::to_string(i));
  fs::create_symlink("missing.txt", path("in/dangling.txt"));
  EXPECT_EQ(error_kind_of([&] { prepare({path("in")}); }), ErrorKind::data);
  EXPECT_EQ(error_of([&] { prepare({path("in")}); }),
            "[prepare] cannot read " + path("in/dangling.txt") +
                ": No such file or directory (a symbolic link to 'missing.txt', which does not exist)");
  fs::remove(path("in/dangling.txt"));
  fs::create_symlink("loop", path("in/sub/loop"));
  EXPECT_EQ(error_of([&] { prepare({path("in")}); }),
            "[prepare] cannot read " + path("in/sub/loop") + ": Too many levels of symbolic links");
  fs::remove(path("in/sub/loop"));
  // Named on its own: the link's reason, not "does not exist".
  fs::create_symlink("gone.txt", path("alone.txt"));
  EXPECT_EQ(error_of([&] { prepare({path("alone.txt")}); }),
            "[prepare] --input " + path("alone.txt") +
                ": cannot read it: No such file or directory (a symbolic link to 'gone.txt', which does not exist)");

  ASSERT_EQ(::mkfifo(path("in/a_fifo").c_str(), 0644), 0);
  const bool socket = make_socket(path("in/sock"));
  fs::create_directories(path("elsewhere"));
  write("elsewhere/x.txt", "not read through the link");
  fs::create_symlink(path("elsewhere"), path("in/linked"));
  const std::vector<std::string> lines = lines_of({path("in")});
  ASSERT_GE(lines.size(), 2u);
  EXPECT_THAT(lines[lines.size() - 2], HasSubstr("input: 4 files, 4 documents"));
  EXPECT_THAT(lines[lines.size() - 2], HasSubstr("; left out " + std::to_string(socket ? 2 : 1) +
                                                 " files of folders that are not text, first: [prepare] " +
                                                 path("in/a_fifo") + " is a FIFO, not a regular file"));
  EXPECT_EQ(lines.back(),
            "did not follow 1 symbolic links to folders (give one as --input to read it), first: " + path("in/linked"));
  if (socket) {  // named on its own: what it is, not the ENXIO of opening it
    EXPECT_EQ(error_of([&] { prepare({path("in/sock")}); }),
              "[data] " + path("in/sock") + " is a socket, not a regular file");
  }
}

// Permissions: a folder or file under an input that cannot be read is an error with the system's
// reason (never left out without a word, nor "does not exist"). Root reads through them: skipped there.
TEST_F(UserText, AFolderOrFileWithoutReadPermissionIsAnErrorSayingSo) {
  fs::create_directories(path("in/secret"));
  for (int i = 0; i < 4; ++i) write("in/" + std::to_string(i) + ".txt", "doc " + std::to_string(i));
  write("in/secret/s.txt", "hidden by permissions");
  ASSERT_EQ(::chmod(path("in/secret").c_str(), 0), 0);
  struct Restore {
    std::string dir;
    ~Restore() { ::chmod(dir.c_str(), 0755); }  // so the fixture can remove it
  } restore{path("in/secret")};
  if (::access(path("in/secret").c_str(), R_OK) == 0) GTEST_SKIP() << "permissions do not stop this user (root)";
  EXPECT_EQ(error_kind_of([&] { prepare({path("in")}); }), ErrorKind::data);
  EXPECT_EQ(error_of([&] { prepare({path("in")}); }),
            "[prepare] cannot read the folder " + path("in/secret") + ": Permission denied");
  EXPECT_EQ(error_of([&] { prepare({path("in/secret")}); }),
            "[prepare] cannot read the folder " + path("in/secret") + ": Permission denied");
  EXPECT_EQ(error_of([&] { prepare({path("in/secret/s.txt")}); }),
            "[prepare] --input " + path("in/secret/s.txt") + ": cannot read it: Permission denied");
  ASSERT_EQ(::chmod(path("in/secret").c_str(), 0755), 0);
  ASSERT_EQ(::chmod(path("in/secret/s.txt").c_str(), 0), 0);
  EXPECT_EQ(error_of([&] { prepare({path("in")}); }),
            "[data] " + path("in/secret/s.txt") + ": cannot open for reading: Permission denied");
}

}  // namespace
}  // namespace zt::data
