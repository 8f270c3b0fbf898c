#pragma once
// Reading the tokenizers' vocabulary files: every error is ErrorKind::data and names the file.
#include <nlohmann/json.hpp>
#include <string>

namespace zt::data::detail {

// The whole file; it must be a regular file.
std::string read_vocab_file(const std::string& path);
// A flat JSON object or array (nothing nested inside), as encoder.json and vocab.json are;
// an error names the file and the byte offset.
nlohmann::json parse_flat_json(const std::string& text, const std::string& path);
// Any JSON value nested at most `max_depth` levels (a deeper one is refused before parsing, as
// walking it recurses); an error names the file and the byte offset.
nlohmann::json parse_json(const std::string& text, const std::string& path, int max_depth);
// `s` cut to at most 80 bytes (on a UTF-8 boundary) for messages.
std::string clip_entry(const std::string& s);

}  // namespace zt::data::detail
